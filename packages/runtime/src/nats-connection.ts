/**
 * The one way kvrouter opens a NATS connection (docs/CONVENTIONS.md rule 3): the request plane here and
 * the event plane in kv-events share it, so reconnect policy and naming live in one place.
 */
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { KvrError, invalidArgument } from '@kvrouter/protocols';

export type { NatsConnection } from '@nats-io/transport-node';

export interface ConnectNatsOptions {
  /** Client name shown by the server's monitoring. */
  name?: string;
  /** First-connect timeout; default 5000 ms. */
  timeoutMs?: number;
  /** Pause between reconnect attempts; default 1000 ms. Attempts never stop. */
  reconnectWaitMs?: number;
  /** Told of each disconnect and reconnect (issue 18: a NATS restart is logged, not silent). */
  onStatus?: (msg: string) => void;
}

export const natsUrlFromEnv = (env: NodeJS.ProcessEnv = process.env): string =>
  env.NATS_SERVER && env.NATS_SERVER.trim() !== '' ? env.NATS_SERVER.trim() : 'nats://localhost:4222';

/**
 * Connects to `url` (comma-separated for a cluster; default `NATS_SERVER`) and keeps reconnecting
 * forever after a drop. Fails with `cannot_connect` naming NATS_SERVER when the first connect fails.
 */
export async function connectNats(
  url: string = natsUrlFromEnv(),
  opts: ConnectNatsOptions = {},
): Promise<NatsConnection> {
  const servers = url
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
  if (servers.length === 0) throw invalidArgument('NATS_SERVER', 'needs at least one URL');
  for (const s of servers)
    if (!/^(nats|tls):\/\/[^/\s]+\/?$/.test(s) && !/^[^/\s:]+:[0-9]+$/.test(s))
      throw invalidArgument('NATS_SERVER', `not a nats://host:port URL: "${s}"`);
  let nc: NatsConnection;
  try {
    nc = await connect({
      servers,
      name: opts.name ?? 'kvrouter',
      timeout: opts.timeoutMs ?? 5000,
      maxReconnectAttempts: -1,
      reconnectTimeWait: opts.reconnectWaitMs ?? 1000,
    });
  } catch (e) {
    throw new KvrError(
      'cannot_connect',
      `NATS at ${servers.join(',')}: ${e instanceof Error ? e.message : String(e)}`,
      503,
      {
        field: 'NATS_SERVER',
      },
    );
  }
  const tell = opts.onStatus;
  if (tell)
    void (async () => {
      let since = 0;
      for await (const st of nc.status()) {
        if (st.type === 'disconnect') {
          since = Date.now();
          tell(`NATS ${st.server}: disconnected; reconnecting every ${opts.reconnectWaitMs ?? 1000} ms`);
        } else if (st.type === 'reconnect')
          tell(`NATS ${st.server}: reconnected${since ? ` after ${Date.now() - since} ms` : ''}`);
      }
    })().catch(() => undefined);
  return nc;
}
