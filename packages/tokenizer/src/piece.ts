/** What a pre-tokenizer is: it reports each piece of a text as [start, end) without allocating. */
export type PieceSink = (start: number, end: number) => void;

export interface PreTokenizer {
  /** Names the path taken (generic regex or a scanner), for logs and benchmarks. */
  readonly kind: string;
  run(s: string, emit: PieceSink): void;
}
