/**
 * Flags the mocker publishes in its workers' model card (read by frontends): the output parsers.
 */
import { resolveConfig, type ResolvedConfig } from '@kvrouter/config';
import { describe, expect, it } from 'vitest';
import { startMocker } from './mocker.js';

const cfg = (...argv: string[]): ResolvedConfig<'mocker'> =>
  resolveConfig('mocker', ['--model-path', 'mock-model', '--discovery-backend', 'mem', ...argv], {}).config;

describe('mocker model card', () => {
  it('carries --dyn-tool-call-parser and --dyn-reasoning-parser as runtime_config tool_call_parser / reasoning_parser', async () => {
    const m = await startMocker(cfg('--dyn-tool-call-parser', 'hermes', '--dyn-reasoning-parser', 'qwen3'), {
      log: () => {},
    });
    try {
      const rc = m.fleet.workers[0]!.card.runtime_config as Record<string, unknown>;
      expect([rc.tool_call_parser, rc.reasoning_parser]).toEqual(['hermes', 'qwen3']);
    } finally {
      await m.stop();
    }
    const plain = await startMocker(cfg(), { log: () => {} });
    try {
      const rc = plain.fleet.workers[0]!.card.runtime_config as Record<string, unknown>;
      expect('tool_call_parser' in rc || 'reasoning_parser' in rc).toBe(false);
    } finally {
      await plain.stop();
    }
  });
});
