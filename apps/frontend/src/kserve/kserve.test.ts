/**
 * `--kserve-grpc-server` with a real `@grpc/grpc-js` client built from the same .proto, against a
 * frontend with embedded simulated workers. The engines answer with given cl100k ids through the
 * test hook `vllm_xargs.mock_output_token_ids` (passed as the `vllm_xargs` request parameter), so
 * every text is known in advance ("The quick brown fox jumps" is 5 cl100k tokens).
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as cl100k from 'gpt-tokenizer/encoding/cl100k_base';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Frontend } from '../frontend.js';
import { eventually, routerIdle, startFrontend } from '../test-helpers.js';
import {
  loadInferenceService,
  type InferParameter,
  type ModelInferRequest,
  type ModelInferResponse,
  type ModelStreamInferResponse,
} from './proto.js';

const MODEL = 'mock-model';
const ANSWER = 'The quick brown fox jumps';
const PROMPT = 'Tell me about foxes';

let fe: Frontend;
let client: grpc.Client & Record<string, (...a: unknown[]) => unknown>;

type GrpcError = grpc.ServiceError;

function rpc<T>(method: string, req: object): Promise<T> {
  return new Promise((resolve, reject) =>
    (client[method] as (r: object, cb: (e: GrpcError | null, r: T) => void) => void).call(
      client,
      req,
      (e, r) => (e ? reject(e) : resolve(r)),
    ),
  );
}

async function rpcError(method: string, req: object): Promise<GrpcError> {
  try {
    await rpc(method, req);
  } catch (e) {
    return e as GrpcError;
  }
  throw new Error(`${method} succeeded; an error was expected`);
}

const scripted = (text: string): Record<string, InferParameter> => ({
  vllm_xargs: { string_param: JSON.stringify({ mock_output_token_ids: cl100k.encode(text) }) },
});

function inferRequest(o: {
  text?: string;
  streaming?: boolean;
  id?: string;
  model?: string;
  parameters?: Record<string, InferParameter>;
}): Partial<ModelInferRequest> {
  const inputs: ModelInferRequest['inputs'] = [
    {
      name: 'text_input',
      datatype: 'BYTES',
      shape: [1],
      contents: { bytes_contents: [Buffer.from(o.text ?? PROMPT)] },
    },
  ];
  if (o.streaming !== undefined)
    inputs.push({
      name: 'streaming',
      datatype: 'BOOL',
      shape: [1],
      contents: { bool_contents: [o.streaming] },
    });
  return {
    model_name: o.model ?? MODEL,
    id: o.id ?? '',
    inputs,
    parameters: { ...scripted(ANSWER), ...o.parameters },
  };
}

/** The one element of a BYTES output tensor as text. */
function output(r: ModelInferResponse, name: string): string | undefined {
  const t = r.outputs.find((x) => x.name === name);
  if (!t) return undefined;
  expect(t.datatype).toBe('BYTES');
  expect(t.shape).toEqual([1]);
  return t.contents.bytes_contents!.map((b) => b.toString('utf8')).join('');
}

/** Every response of a bidi stream fed with `reqs`, and how it ended. */
async function streamAll(
  reqs: Partial<ModelInferRequest>[],
): Promise<{ responses: ModelStreamInferResponse[]; status: grpc.StatusObject }> {
  const call = (client.ModelStreamInfer as () => grpc.ClientDuplexStream<object, ModelStreamInferResponse>)();
  const responses: ModelStreamInferResponse[] = [];
  call.on('data', (r: ModelStreamInferResponse) => responses.push(r));
  const status = new Promise<grpc.StatusObject>((resolve) => call.on('status', resolve));
  call.on('error', () => undefined);
  for (const r of reqs) call.write(r);
  call.end();
  return { responses, status: await status };
}

async function metricsText(url: string): Promise<string> {
  const r = await fetch(url);
  expect(r.status).toBe(200);
  return r.text();
}

/** `dynamo_frontend_requests_total` of the gRPC endpoint (`completions`, unary, success). */
function unarySuccesses(text: string): number {
  const line = text
    .split('\n')
    .find(
      (l) =>
        l.startsWith('dynamo_frontend_requests_total{') &&
        l.includes(`model="${MODEL}"`) &&
        l.includes('endpoint="completions"') &&
        l.includes('request_type="unary"') &&
        l.includes('status="success"'),
    );
  return line ? Number(line.slice(line.lastIndexOf(' ') + 1)) : 0;
}

beforeAll(async () => {
  fe = await startFrontend(
    [
      '--kserve-grpc-server',
      ...['--kserve-grpc-port', '0', '--grpc-metrics-port', '0', '--mocker-workers', '2'],
    ],
    { env: { DYN_HTTP_BODY_LIMIT_MB: '1' } },
  );
  const Service = loadInferenceService();
  client = new Service(`127.0.0.1:${fe.kserve!.port}`, grpc.credentials.createInsecure()) as typeof client;
});
afterAll(async () => {
  client?.close();
  await fe?.close(0);
});

describe('KServe v2 gRPC frontend', () => {
  it('health RPCs: live, ready (= can route), model ready, server metadata', async () => {
    expect(await rpc('ServerLive', {})).toEqual({ live: true });
    expect(await rpc('ServerReady', {})).toEqual({ ready: true });
    expect(await rpc('ModelReady', { name: MODEL })).toEqual({ ready: true });
    expect(await rpc('ModelReady', { name: MODEL, version: '1' })).toEqual({ ready: true });
    expect(await rpc('ModelReady', { name: MODEL, version: '2' })).toEqual({ ready: false });
    expect(await rpc('ModelReady', { name: 'no-such-model' })).toEqual({ ready: false });
    const meta = await rpc<{ name: string; version: string; extensions: string[] }>('ServerMetadata', {});
    expect(meta.name).toBe('kvrouter');
    expect(meta.version).toMatch(/^\d+\.\d+\.\d+/);
    expect(meta.extensions).toEqual(['model_configuration', 'parameters']);
  });

  it('ModelMetadata and ModelConfig describe the text model as Dynamo does', async () => {
    expect(await rpc('ModelMetadata', { name: MODEL })).toEqual({
      name: MODEL,
      versions: ['1'],
      platform: 'dynamo',
      inputs: [
        { name: 'text_input', datatype: 'BYTES', shape: [1] },
        { name: 'streaming', datatype: 'BOOL', shape: [1] },
      ],
      outputs: [
        { name: 'text_output', datatype: 'BYTES', shape: [-1] },
        { name: 'finish_reason', datatype: 'BYTES', shape: [-1] },
      ],
    });
    const { config } = await rpc<{ config: Record<string, unknown> }>('ModelConfig', { name: MODEL });
    expect(config).toMatchObject({
      name: MODEL,
      platform: 'dynamo',
      backend: 'dynamo',
      max_batch_size: 0,
      // 4096 GPU blocks × 16 tokens (the test engines) = 65536.
      parameters: { context_length: { string_value: '65536' }, kv_cache_block_size: { string_value: '16' } },
    });
    // ModelOutput has no `optional` field.
    const tensors = (k: string) =>
      (config[k] as { name: string; data_type: string; dims: number[]; optional?: boolean }[]).map((t) => [
        t.name,
        t.data_type,
        t.dims,
        t.optional,
      ]);
    expect(tensors('input')).toEqual([
      ['text_input', 'TYPE_STRING', [1], false],
      ['streaming', 'TYPE_BOOL', [1], true],
    ]);
    expect(tensors('output')).toEqual([
      ['text_output', 'TYPE_STRING', [-1], undefined],
      ['finish_reason', 'TYPE_STRING', [-1], undefined],
    ]);
    const e = await rpcError('ModelConfig', { name: 'no-such-model' });
    expect(e.code).toBe(grpc.status.NOT_FOUND);
    expect((await rpcError('ModelMetadata', { name: 'no-such-model' })).code).toBe(grpc.status.NOT_FOUND);
  });

  it('ModelInfer: the whole answer in text_output, finish reason, usage parameters, id echoed', async () => {
    const r = await rpc<ModelInferResponse>('ModelInfer', inferRequest({ id: 'req-1' }));
    expect(r.model_name).toBe(MODEL);
    expect(r.model_version).toBe('1');
    expect(r.id).toBe('req-1');
    expect(output(r, 'text_output')).toBe(ANSWER);
    expect(output(r, 'finish_reason')).toBe('stop');
    expect(r.parameters.prompt_tokens).toMatchObject({ int64_param: cl100k.encode(PROMPT).length });
    expect(r.parameters.completion_tokens).toMatchObject({ int64_param: 5 });
  });

  it('ModelInfer: max_tokens cuts the answer (finish length); raw_input_contents and requested outputs work', async () => {
    const cut = await rpc<ModelInferResponse>(
      'ModelInfer',
      inferRequest({ parameters: { max_tokens: { int64_param: 2 } } }),
    );
    expect(output(cut, 'text_output')).toBe('The quick');
    expect(output(cut, 'finish_reason')).toBe('length');

    // Raw form: a BYTES element is a 4-byte little-endian length, then the bytes.
    const prompt = Buffer.from(PROMPT, 'utf8');
    const len = Buffer.alloc(4);
    len.writeUInt32LE(prompt.length);
    const raw = await rpc<ModelInferResponse>('ModelInfer', {
      model_name: MODEL,
      inputs: [{ name: 'text_input', datatype: 'BYTES', shape: [1] }],
      raw_input_contents: [Buffer.concat([len, prompt])],
      outputs: [{ name: 'text_output' }],
      parameters: scripted(ANSWER),
    });
    expect(raw.outputs.map((o) => o.name)).toEqual(['text_output']);
    expect(output(raw, 'text_output')).toBe(ANSWER);
    expect(raw.parameters.prompt_tokens).toMatchObject({ int64_param: cl100k.encode(PROMPT).length });
  });

  it('ModelStreamInfer: one response per token when streaming, one whole response otherwise, both requests at once', async () => {
    const { responses, status } = await streamAll([
      inferRequest({ id: 'a', streaming: true }),
      inferRequest({ id: 'b', streaming: false, parameters: scripted('Hello world') }),
    ]);
    expect(status.code).toBe(grpc.status.OK);
    expect(responses.every((r) => r.error_message === '')).toBe(true);
    const a = responses.filter((r) => r.infer_response?.id === 'a').map((r) => r.infer_response!);
    const b = responses.filter((r) => r.infer_response?.id === 'b').map((r) => r.infer_response!);
    // The first token leaves at the end of prefill, alone; later tokens may arrive together.
    const n = a.length;
    expect(n).toBeGreaterThanOrEqual(2);
    expect(output(a[0]!, 'text_output')).toBe('The');
    expect(a.map((r) => output(r, 'text_output')).join('')).toBe(ANSWER);
    expect(a.map((r) => output(r, 'finish_reason'))).toEqual([...Array<string>(n - 1).fill(''), 'stop']);
    expect(a.map((r) => r.parameters.triton_final_response?.bool_param)).toEqual([
      ...Array<boolean>(n - 1).fill(false),
      true,
    ]);
    expect(a[n - 1]!.parameters.completion_tokens).toMatchObject({ int64_param: 5 });
    expect(b.map((r) => [output(r, 'text_output'), output(r, 'finish_reason')])).toEqual([
      ['Hello world', 'stop'],
    ]);
    expect(responses).toHaveLength(n + 1);
  });

  it('errors are gRPC status codes naming the field', async () => {
    const cases: [Partial<ModelInferRequest>, grpc.status, string][] = [
      [inferRequest({ model: 'no-such-model' }), grpc.status.NOT_FOUND, 'no-such-model'],
      [{ ...inferRequest({}), model_version: '7' }, grpc.status.NOT_FOUND, 'no version 7'],
      [
        { ...inferRequest({}), inputs: [] },
        grpc.status.INVALID_ARGUMENT,
        'text_input: required input is missing',
      ],
      [
        {
          ...inferRequest({}),
          inputs: [{ name: 'text_input', datatype: 'INT32', shape: [1], contents: { int_contents: [1] } }],
        },
        grpc.status.INVALID_ARGUMENT,
        'text_input: datatype must be BYTES, got INT32',
      ],
      [
        {
          ...inferRequest({}),
          inputs: [
            {
              name: 'prompt',
              datatype: 'BYTES',
              shape: [1],
              contents: { bytes_contents: [Buffer.from('x')] },
            },
          ],
        },
        grpc.status.INVALID_ARGUMENT,
        'inputs[0]: unknown input "prompt"',
      ],
      [
        inferRequest({ parameters: { max_tokens: { string_param: '8' } } }),
        grpc.status.INVALID_ARGUMENT,
        'parameters.max_tokens: expected int64_param or uint64_param, got string_param',
      ],
      [
        inferRequest({ parameters: { max_tokens: { int64_param: 0 } } }),
        grpc.status.INVALID_ARGUMENT,
        'parameters.max_tokens: expected an integer between 1 and 4294967295, got 0',
      ],
      [
        inferRequest({ parameters: { beam_width: { int64_param: 2 } } }),
        grpc.status.INVALID_ARGUMENT,
        'parameters.beam_width: unknown parameter',
      ],
      [
        inferRequest({ streaming: true }),
        grpc.status.INVALID_ARGUMENT,
        'streaming: ModelInfer answers with one response; use ModelStreamInfer',
      ],
    ];
    for (const [req, code, details] of cases) {
      const e = await rpcError('ModelInfer', req);
      expect([e.code, e.details]).toEqual([code, expect.stringContaining(details)]);
    }
    // DYN_HTTP_BODY_LIMIT_MB (1 here) bounds a request message: 1 MiB + 1 byte of prompt is over it.
    const big = await rpcError('ModelInfer', inferRequest({ text: 'x'.repeat(1024 * 1024 + 1) }));
    expect(big.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    // On a stream, a request refused before its first response ends the stream with its status.
    const s = await streamAll([inferRequest({ model: 'no-such-model', streaming: true })]);
    expect(s.responses).toEqual([]);
    expect(s.status.code).toBe(grpc.status.NOT_FOUND);
  });

  it('a client cancelling a stream mid-answer frees its booking', async () => {
    const call = (
      client.ModelStreamInfer as () => grpc.ClientDuplexStream<object, ModelStreamInferResponse>
    )();
    call.on('error', () => undefined);
    const first = new Promise<void>((resolve) => call.once('data', () => resolve()));
    // No script: the engine generates up to 4096 tokens, far more than arrive before the cancel.
    call.write({ ...inferRequest({ streaming: true }), parameters: { max_tokens: { int64_param: 4096 } } });
    await first;
    const busy = fe.registry.allSets().reduce((n, s) => n + s.router.liveRequestCount, 0);
    expect(busy).toBe(1);
    call.cancel();
    await eventually(() => routerIdle(fe), 5000, 'the cancelled request to be freed');
  });

  it('--grpc-metrics-port serves the frontend registry: a gRPC request counts once there and on /metrics', async () => {
    const grpcMetrics = `http://127.0.0.1:${fe.kserve!.metricsPort}/metrics`;
    const before = unarySuccesses(await metricsText(grpcMetrics));
    await rpc('ModelInfer', inferRequest({}));
    const after = await metricsText(grpcMetrics);
    expect(unarySuccesses(after)).toBe(before + 1);
    expect(unarySuccesses(await metricsText(`${fe.url}/metrics`))).toBe(before + 1);
    const health = await fetch(`http://127.0.0.1:${fe.kserve!.metricsPort}/health`);
    expect(health.status).toBe(200);
    expect(((await health.json()) as { status: string }).status).toBe('healthy');
    const models = await fetch(`http://127.0.0.1:${fe.kserve!.metricsPort}/v1/models`);
    expect(((await models.json()) as { data: { id: string }[] }).data.map((m) => m.id)).toEqual([MODEL]);
    expect((await fetch(`http://127.0.0.1:${fe.kserve!.metricsPort}/v1/completions`)).status).toBe(404);
  });

  it('no ready worker: UNAVAILABLE, and ServerReady / ModelReady say false', async () => {
    await eventually(() => routerIdle(fe), 5000, 'idle routers');
    for (const s of fe.registry.allSets()) for (const id of [...s.workers.keys()]) s.markDown(id);
    expect(await rpc('ServerReady', {})).toEqual({ ready: false });
    expect(await rpc('ModelReady', { name: MODEL })).toEqual({ ready: false });
    const e = await rpcError('ModelInfer', inferRequest({}));
    expect([e.code, e.details]).toEqual([grpc.status.UNAVAILABLE, `model ${MODEL} has no ready worker`]);
  });

  it('with --tls-cert-path/--tls-key-path gRPC is TLS: a client trusting the certificate is served, a plaintext one is not', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kvr-grpc-tls-'));
    const cert = path.join(dir, 'cert.pem');
    const key = path.join(dir, 'key.pem');
    const gen = spawnSync('openssl', [
      ...['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', cert, '-days', '1'],
      ...['-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1'],
    ]);
    expect(gen.status, gen.stderr?.toString()).toBe(0);
    const fe3 = await startFrontend([
      ...['--tls-cert-path', cert, '--tls-key-path', key, '--kserve-grpc-server'],
      ...['--kserve-grpc-port', '0', '--grpc-metrics-port', '0', '--mocker-workers', '1'],
    ]);
    const Service = loadInferenceService();
    const target = `127.0.0.1:${fe3.kserve!.port}`;
    const tls = new Service(target, grpc.credentials.createSsl(fs.readFileSync(cert))) as typeof client;
    const plain = new Service(target, grpc.credentials.createInsecure()) as typeof client;
    const infer = (c: typeof client) =>
      new Promise<ModelInferResponse>((resolve, reject) =>
        (c.ModelInfer as (r: object, cb: (e: GrpcError | null, r: ModelInferResponse) => void) => void).call(
          c,
          inferRequest({}),
          (e, r) => (e ? reject(e) : resolve(r)),
        ),
      );
    try {
      expect(output(await infer(tls), 'text_output')).toBe(ANSWER);
      const e = await infer(plain).then(
        () => null,
        (x: GrpcError) => x,
      );
      expect(e?.code).toBe(grpc.status.UNAVAILABLE);
    } finally {
      tls.close();
      plain.close();
      await fe3.close(0);
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('graceful shutdown: an in-flight ModelInfer finishes, new calls get UNAVAILABLE, then the port closes', async () => {
    // Engines at the §17 timing model's own speed: the long request outlasts the steps below.
    const fe2 = await startFrontend(
      [
        '--kserve-grpc-server',
        ...['--kserve-grpc-port', '0', '--grpc-metrics-port', '0', '--mocker-workers', '1'],
      ],
      { embedded: { engine: { speedupRatio: 1 } } },
    );
    const Service = loadInferenceService();
    const c2 = new Service(
      `127.0.0.1:${fe2.kserve!.port}`,
      grpc.credentials.createInsecure(),
    ) as typeof client;
    const call = <T>(method: string, req: object) =>
      new Promise<T>((resolve, reject) =>
        (c2[method] as (r: object, cb: (e: GrpcError | null, r: T) => void) => void).call(c2, req, (e, r) =>
          e ? reject(e) : resolve(r),
        ),
      );
    try {
      // No script: 200 simulated tokens, finish length.
      const long = call<ModelInferResponse>('ModelInfer', {
        ...inferRequest({}),
        parameters: { max_tokens: { int64_param: 200 } },
      });
      await eventually(() => fe2.inflightRequests === 1, 5000, 'the request in flight');
      const closed = fe2.close(30);
      const refused = await call('ModelInfer', inferRequest({})).then(
        () => null,
        (e: GrpcError) => e,
      );
      expect([refused?.code, refused?.details]).toEqual([
        grpc.status.UNAVAILABLE,
        'the frontend is shutting down',
      ]);
      const r = await long;
      expect(output(r, 'finish_reason')).toBe('length');
      expect(r.parameters.completion_tokens).toMatchObject({ int64_param: 200 });
      await closed;
      const gone = await call('ServerLive', {}).then(
        () => null,
        (e: GrpcError) => e,
      );
      expect(gone?.code).toBe(grpc.status.UNAVAILABLE);
    } finally {
      c2.close();
      await fe2.close(0);
    }
  });
});
