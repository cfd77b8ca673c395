/**
 * A directory of small text files, read whole (the `DYN_TOPOLOGY_MOUNT_PATH` contract of §13, which
 * the mocker and the worker adapter both read; `@kvrouter/topology` is pure and takes this as I/O).
 */
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

export interface TextDirEntry {
  name: string;
  /** A regular file (its content is read); false for directories, sockets, vanished entries. */
  isFile: boolean;
  content: string | null;
}

/** Every entry of `dir` with the text of each regular file; null when the directory is missing. */
export function readTextDir(dir: string): TextDirEntry[] | null {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return null;
  }
  return names.map((name) => {
    const p = join(dir, name);
    try {
      const isFile = statSync(p).isFile();
      return { name, isFile, content: isFile ? readFileSync(p, 'utf8') : null };
    } catch {
      // Vanished between listing and reading: absent.
      return { name, isFile: false, content: null };
    }
  });
}
