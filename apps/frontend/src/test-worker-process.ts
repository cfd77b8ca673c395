/**
 * A simulated worker in a process of its own, for tests that kill workers with SIGKILL: file
 * discovery under `DYN_FILE_KV`, tcp request plane on loopback. Prints `{"id": "<instance id>"}`
 * once registered. (The mocker app is the full-featured version of this.)
 */
import { createDiscovery } from '@kvrouter/runtime';
import { SimWorker } from '@kvrouter/sim-worker';

const d = await createDiscovery({ backend: 'file', fileRoot: process.env.DYN_FILE_KV, filePollMs: 100 });
const w = await SimWorker.start({
  discovery: d,
  namespace: 'dynamo',
  component: 'backend',
  modelName: 'mock-model',
  requestPlane: { kind: 'tcp', host: '127.0.0.1' },
  eventPlane: null,
  engine: {
    speedupRatio: Number(process.env.SPEEDUP ?? '1'),
    numGpuBlocks: 4096,
    blockSize: 16,
    vocabSize: 100256,
  },
});
console.log(JSON.stringify({ id: w.instanceId.toString() }));
process.on('SIGTERM', () => void w.stop().then(() => process.exit(0)));
