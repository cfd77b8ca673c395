/**
 * Request planes (tcp, nats against a local nats-server, inproc), client and server in one process:
 * - unary: sequential round trips of a 128-token payload, p50 / p99 µs;
 * - stream: one stream of N token items, items per second;
 * - fan-out: 200 concurrent streams x 100 items over one client, items per second.
 * Drop into benchmarks/src/suites/rpc.ts (needs @kvrouter/runtime and @kvrouter/testkit).
 */
import {
  InprocHub,
  InprocRequestClient,
  NatsRequestClient,
  NatsRequestServer,
  TcpRequestClient,
  TcpRequestServer,
  connectNats,
  type RequestClient,
  type RequestServer,
} from '@kvrouter/runtime';
import { startNats } from '@kvrouter/testkit';
import { stats, type Row, type Suite, type SuiteContext } from '../harness.js';

interface Plane {
  name: string;
  server: RequestServer;
  client: RequestClient;
  close(): Promise<void>;
}

async function planes(): Promise<Plane[]> {
  const tcpS = await TcpRequestServer.listen({ host: '127.0.0.1', port: 0 });
  const tcpC = new TcpRequestClient();
  const nats = await startNats({ jetstream: false });
  const ncS = await connectNats(nats.url);
  const ncC = await connectNats(nats.url);
  const natsS = await NatsRequestServer.start(ncS, { subject: 'bench.rpc' });
  const natsC = new NatsRequestClient(ncC);
  const hub = new InprocHub();
  const inS = hub.listen();
  const inC = new InprocRequestClient(hub);
  return [
    { name: 'tcp', server: tcpS, client: tcpC, close: async () => (await tcpC.close(), await tcpS.close()) },
    {
      name: 'nats',
      server: natsS,
      client: natsC,
      close: async () => {
        await natsC.close();
        await natsS.close();
        await ncS.close();
        await ncC.close();
        await nats.stop();
      },
    },
    { name: 'inproc', server: inS, client: inC, close: async () => (await inC.close(), await inS.close()) },
  ];
}

export const suite: Suite = {
  name: 'rpc',
  description: 'request planes: unary latency, stream throughput, 200-stream fan-out',
  async run(ctx: SuiteContext): Promise<Row[]> {
    const rows: Row[] = [];
    const unaryN = ctx.quick ? 300 : 3000;
    const streamN = ctx.quick ? 5000 : 50_000;
    const tokens = Array.from({ length: 128 }, (_, i) => i * 7);
    for (const p of await planes()) {
      p.server.serve('echo', async (x: unknown) => x);
      p.server.serve('gen', async function* (n: unknown) {
        for (let i = 0; i < (n as number); i++) yield { token_ids: [i], index: i };
      });
      for (let i = 0; i < 200; i++) await p.client.unary(p.server.transport, 'echo', { token_ids: tokens });
      const us = new Float64Array(unaryN);
      for (let i = 0; i < unaryN; i++) {
        const t0 = process.hrtime.bigint();
        await p.client.unary(p.server.transport, 'echo', { token_ids: tokens });
        us[i] = Number(process.hrtime.bigint() - t0) / 1000;
        if (i % 500 === 0) ctx.progress(`${p.name} unary`, i, unaryN);
      }
      const s = stats(us);
      rows.push({ name: `${p.name} unary 128 tokens`, value: s.p50, unit: 'µs p50', extra: { p99: s.p99 } });
      let t0 = process.hrtime.bigint();
      let n = 0;
      for await (const _ of p.client.stream(p.server.transport, 'gen', streamN)) n++;
      let sec = Number(process.hrtime.bigint() - t0) / 1e9;
      rows.push({ name: `${p.name} one stream of ${n} items`, value: Math.round(n / sec), unit: 'items/s' });
      t0 = process.hrtime.bigint();
      const counts = await Promise.all(
        Array.from({ length: 200 }, async () => {
          let k = 0;
          for await (const _ of p.client.stream(p.server.transport, 'gen', 100)) k++;
          return k;
        }),
      );
      sec = Number(process.hrtime.bigint() - t0) / 1e9;
      const total = counts.reduce((a, b) => a + b, 0);
      rows.push({
        name: `${p.name} 200 streams x 100 items`,
        value: Math.round(total / sec),
        unit: 'items/s',
      });
      await p.close();
    }
    return rows;
  },
};
