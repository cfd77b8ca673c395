/**
 * The KServe v2 / Triton protobuf (`grpc_predict_v2.proto` beside this file, package `inference`)
 * loaded with `@grpc/proto-loader`, and the TypeScript shapes of the messages as the loader's options
 * below decode them (field names as in the .proto, int64 as number, enums as their names, bytes as
 * Buffer, oneofs with the name of the set member). The server and the tests' client load it the same
 * way.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

/**
 * The .proto stays in src/ (tsc copies no data files): from src/kserve/ and dist/kserve/ alike the
 * package root is two levels up.
 */
const PROTO_PATH = path.resolve(
  path.dirname(fileURLToPath(import.meta.url)),
  '../../src/kserve/grpc_predict_v2.proto',
);

const LOADER_OPTIONS: protoLoader.Options = {
  keepCase: true,
  longs: Number,
  enums: String,
  defaults: true,
  oneofs: true,
};

/** `inference.GRPCInferenceService`: its service definition and a client constructor. */
export function loadInferenceService(): grpc.ServiceClientConstructor {
  const def = protoLoader.loadSync(PROTO_PATH, LOADER_OPTIONS);
  const pkg = grpc.loadPackageDefinition(def) as unknown as {
    inference: { GRPCInferenceService: grpc.ServiceClientConstructor };
  };
  return pkg.inference.GRPCInferenceService;
}

export interface InferParameter {
  parameter_choice?: 'bool_param' | 'int64_param' | 'string_param' | 'double_param' | 'uint64_param';
  bool_param?: boolean;
  int64_param?: number;
  string_param?: string;
  double_param?: number;
  uint64_param?: number;
}

export interface InferTensorContents {
  bool_contents?: boolean[];
  int_contents?: number[];
  int64_contents?: number[];
  uint_contents?: number[];
  uint64_contents?: number[];
  fp32_contents?: number[];
  fp64_contents?: number[];
  bytes_contents?: Buffer[];
}

export interface InferInputTensor {
  name: string;
  datatype: string;
  shape: number[];
  parameters?: Record<string, InferParameter>;
  contents?: InferTensorContents | null;
}

export interface ModelInferRequest {
  model_name: string;
  model_version: string;
  id: string;
  parameters: Record<string, InferParameter>;
  inputs: InferInputTensor[];
  outputs: { name: string; parameters?: Record<string, InferParameter> }[];
  raw_input_contents: Buffer[];
}

export interface InferOutputTensor {
  name: string;
  datatype: string;
  shape: number[];
  parameters?: Record<string, InferParameter>;
  contents: InferTensorContents;
}

export interface ModelInferResponse {
  model_name: string;
  model_version: string;
  id: string;
  parameters: Record<string, InferParameter>;
  outputs: InferOutputTensor[];
  raw_output_contents?: Buffer[];
}

export interface ModelStreamInferResponse {
  error_message: string;
  infer_response: ModelInferResponse | null;
}

export interface TensorMetadata {
  name: string;
  datatype: string;
  shape: number[];
}

export interface ModelMetadataResponse {
  name: string;
  versions: string[];
  platform: string;
  inputs: TensorMetadata[];
  outputs: TensorMetadata[];
}

export interface ModelTensorConfig {
  name: string;
  data_type: string;
  dims: number[];
  optional?: boolean;
}

export interface ModelConfig {
  name: string;
  platform: string;
  backend: string;
  max_batch_size: number;
  input: ModelTensorConfig[];
  output: ModelTensorConfig[];
  parameters: Record<string, { string_value: string }>;
}
