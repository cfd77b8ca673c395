import { KvrError } from '@kvrouter/protocols';
import type { EngineConfig } from './config.js';
import type { EngineRequest } from './types.js';

function invalid(field: string, message: string): never {
  throw new KvrError('invalid_request', `request ${field}: ${message}`, 400, { field });
}

/**
 * Checks a request before any state changes (both scheduler flavours); returns the KV blocks its
 * whole sequence can need. `promptLimit`: the largest prompt a single pass may take when chunked
 * prefill is off, and the flag that sets it.
 */
export function checkRequest(
  req: EngineRequest,
  cfg: Readonly<EngineConfig>,
  isLive: (id: string) => boolean,
  promptLimit: { tokens: number; name: string } | null,
): number {
  const { id, tokenIds, maxTokens, loraName } = req;
  if (typeof id !== 'string' || id.length === 0) invalid('id', 'expected a non-empty string');
  if (isLive(id)) invalid('id', `duplicate live request id ${id}`);
  if (!(tokenIds instanceof Uint32Array)) {
    if (!Array.isArray(tokenIds)) invalid('tokenIds', 'expected a Uint32Array or an array of u32');
    for (let i = 0; i < tokenIds.length; i++) {
      const t: unknown = tokenIds[i];
      if (typeof t !== 'number' || !Number.isInteger(t) || t < 0 || t > 0xffffffff) {
        invalid(`tokenIds[${i}]`, `expected a u32, got ${String(t)}`);
      }
    }
  }
  if (tokenIds.length === 0) invalid('tokenIds', 'empty prompt');
  if (typeof maxTokens !== 'number' || !Number.isInteger(maxTokens) || maxTokens < 1) {
    invalid('maxTokens', `expected an integer >= 1, got ${String(maxTokens)}`);
  }
  if (loraName !== undefined && typeof loraName !== 'string') invalid('loraName', 'expected a string');
  if (req.kvTransferred !== undefined && typeof req.kvTransferred !== 'boolean')
    invalid('kvTransferred', 'expected a boolean');
  const bs = cfg.blockSize;
  // The last generated token's KV is never computed, hence the − 1.
  const maxBlocks = Math.ceil((tokenIds.length + maxTokens - 1) / bs);
  if (maxBlocks > cfg.numGpuBlocks) {
    const field = Math.ceil(tokenIds.length / bs) > cfg.numGpuBlocks ? 'tokenIds' : 'maxTokens';
    throw new KvrError(
      'request_too_large',
      `request ${field}: needs ${maxBlocks} KV blocks, the engine has ${cfg.numGpuBlocks}`,
      400,
      {
        field,
      },
    );
  }
  if (promptLimit !== null && tokenIds.length > promptLimit.tokens) {
    throw new KvrError(
      'request_too_large',
      `request tokenIds: ${tokenIds.length} prompt tokens exceed ${promptLimit.name} ${promptLimit.tokens} with chunked prefill off`,
      400,
      { field: 'tokenIds' },
    );
  }
  return maxBlocks;
}
