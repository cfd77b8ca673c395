/** The body thread (body-thread.ts): UTF-8 bytes → the parsed request body, as `readUtf8Body` + `parseBody` do inline. */
import { parentPort } from 'node:worker_threads';
import { parseJson } from '@kvrouter/protocols';
import { utf8Text } from './body-thread.js';
import { BAIL, parseJsonBytes } from './json-bytes.js';

parentPort!.on('message', (m: { id: number; bytes: Uint8Array }) => {
  const bytes = Buffer.from(m.bytes.buffer, m.bytes.byteOffset, m.bytes.byteLength);
  let value: unknown;
  try {
    // From the bytes (json-bytes.ts); what that parser does not vouch for takes the whole-text path.
    value = parseJsonBytes(bytes);
    if (value === BAIL) value = parseJson(utf8Text(bytes));
  } catch (e) {
    parentPort!.postMessage({ id: m.id, error: (e as Error).message });
    return;
  }
  try {
    parentPort!.postMessage({ id: m.id, value });
  } catch {
    // Not clonable (nesting deeper than the serializer's stack, which JSON.parse accepts): the
    // bytes go back and the event loop parses them as inline parsing would. Thrown here, it would
    // have ended this thread and every other body on it with 500.
    parentPort!.postMessage({ id: m.id, bytes: m.bytes }, [m.bytes.buffer as ArrayBuffer]);
  }
});
