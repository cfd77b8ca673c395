import { expect } from 'vitest';
import { resolveConfig } from '@kvrouter/config';
import { MockerConfigError, planFromConfig, type MockerConfig } from './options.js';

/** The mocker's config from these flags after `--model-path Qwen/Qwen3-0.6B`, as the CLI resolves it. */
export const cfg = (...argv: string[]): MockerConfig =>
  resolveConfig('mocker', ['--model-path', 'Qwen/Qwen3-0.6B', ...argv], {}).config;

/** The flag `planFromConfig` refuses `c` for (a `MockerConfigError`), or undefined when it accepts it. */
export const flagOf = (c: MockerConfig): unknown => {
  try {
    planFromConfig(c);
  } catch (e) {
    expect(e).toBeInstanceOf(MockerConfigError);
    return (e as MockerConfigError).detail?.flag;
  }
  return undefined;
};
