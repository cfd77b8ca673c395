/**
 * The tcp request plane's bind and published addresses follow `DYN_TCP_RPC_HOST` (Dynamo's name:
 * published, and bound unless told otherwise) and `KVR_TCP_RPC_BIND_HOST` (issue 18), checked on
 * real listeners: what the transport publishes, and where the socket is bound.
 */
import { networkInterfaces } from 'node:os';
import { afterEach, expect, it } from 'vitest';
import { TcpRequestClient, TcpRequestServer } from './tcp.js';

const open: TcpRequestServer[] = [];
afterEach(async () => {
  for (const s of open.splice(0)) await s.close({ graceMs: 0 });
});

const listen = async (env: NodeJS.ProcessEnv): Promise<TcpRequestServer> => {
  const s = await TcpRequestServer.listen({ port: 0, env });
  open.push(s);
  return s;
};
const boundAddress = (s: TcpRequestServer): string =>
  (s as unknown as { server: { address(): { address: string } } }).server.address().address;

it('defaults: bound on every interface, published on the first non-loopback IPv4', async () => {
  const s = await listen({});
  const first =
    Object.values(networkInterfaces())
      .flatMap((l) => l ?? [])
      .find((a) => a.family === 'IPv4' && !a.internal)?.address ?? '127.0.0.1';
  expect(boundAddress(s)).toBe('0.0.0.0');
  expect(s.transport.tcp).toBe(`${first}:${s.port}`);
});

it('DYN_TCP_RPC_HOST is published and bound; a client reaches the server through it', async () => {
  const s = await listen({ DYN_TCP_RPC_HOST: '127.0.0.1' });
  expect(boundAddress(s)).toBe('127.0.0.1');
  expect(s.transport).toEqual({ tcp: `127.0.0.1:${s.port}` });
  s.serve('echo', async function* (p) {
    yield p;
  });
  const c = new TcpRequestClient();
  expect(await c.unary(s.transport, 'echo', { x: 1 })).toEqual({ x: 1 });
  await c.close();
});

it('KVR_TCP_RPC_BIND_HOST binds elsewhere while DYN_TCP_RPC_HOST stays the published name', async () => {
  const s = await listen({
    DYN_TCP_RPC_HOST: 'worker-7.internal.example',
    KVR_TCP_RPC_BIND_HOST: '127.0.0.1',
  });
  expect(boundAddress(s)).toBe('127.0.0.1');
  expect(s.transport).toEqual({ tcp: `worker-7.internal.example:${s.port}` });
  const v6 = await listen({ DYN_TCP_RPC_HOST: '[::1]', KVR_TCP_RPC_BIND_HOST: '0.0.0.0' });
  expect(boundAddress(v6)).toBe('0.0.0.0');
  expect(v6.transport).toEqual({ tcp: `[::1]:${v6.port}` });
});

it('a bad value is refused naming the variable', async () => {
  await expect(TcpRequestServer.listen({ port: 0, env: { DYN_TCP_RPC_HOST: 'http://x:1' } })).rejects.toThrow(
    /DYN_TCP_RPC_HOST.*must be an IP address or a host name, got "http:\/\/x:1"/,
  );
  await expect(
    TcpRequestServer.listen({ port: 0, env: { KVR_TCP_RPC_BIND_HOST: 'a b' } }),
  ).rejects.toMatchObject({
    code: 'invalid_argument',
  });
});
