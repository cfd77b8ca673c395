/**
 * Minimal NumPy `.npz` reader for `--planner-profile-data` files as upstream writes them
 * (`numpy.savez` / `savez_compressed`): a zip (zip64 sizes allowed) of `.npy` arrays. Numeric
 * little-endian dtypes, C or Fortran order. Pure: a deflated member needs the caller's raw-inflate
 * (the mocker passes `node:zlib`'s `inflateRawSync`).
 */

export interface NpyArray {
  shape: number[];
  /** Row-major (C order) values. */
  data: Float64Array;
}

export type InflateRaw = (bytes: Uint8Array) => Uint8Array;

export class NpzError extends Error {}

const u16 = (b: Uint8Array, o: number): number => b[o] | (b[o + 1] << 8);
const u32 = (b: Uint8Array, o: number): number =>
  (b[o] | (b[o + 1] << 8) | (b[o + 2] << 16) | (b[o + 3] << 24)) >>> 0;
const u64 = (b: Uint8Array, o: number): number => u32(b, o) + u32(b, o + 4) * 2 ** 32;

/** Arrays by name (the `.npy` suffix dropped). */
export function parseNpz(bytes: Uint8Array, inflateRaw?: InflateRaw): Map<string, NpyArray> {
  // End of central directory: the last 0x06054b50 within the final 64 KiB + 22 bytes.
  let eocd = -1;
  for (let o = bytes.length - 22; o >= Math.max(0, bytes.length - 22 - 0xffff); o--) {
    if (u32(bytes, o) === 0x06054b50) {
      eocd = o;
      break;
    }
  }
  if (eocd < 0) throw new NpzError('not a zip archive (no end of central directory)');
  let count = u16(bytes, eocd + 10);
  let cd = u32(bytes, eocd + 16);
  if (cd === 0xffffffff || count === 0xffff) {
    // Zip64 end of central directory, found through its locator just before the EOCD.
    const loc = eocd - 20;
    if (loc < 0 || u32(bytes, loc) !== 0x07064b50) throw new NpzError('zip64 archive without its locator');
    const z = u64(bytes, loc + 8);
    if (u32(bytes, z) !== 0x06064b50) throw new NpzError('bad zip64 end of central directory');
    count = u64(bytes, z + 32);
    cd = u64(bytes, z + 48);
  }
  const out = new Map<string, NpyArray>();
  let o = cd;
  for (let i = 0; i < count; i++) {
    if (u32(bytes, o) !== 0x02014b50) throw new NpzError(`bad central directory entry ${i}`);
    const method = u16(bytes, o + 10);
    let csize = u32(bytes, o + 20);
    let usize = u32(bytes, o + 24);
    const nameLen = u16(bytes, o + 28);
    const extraLen = u16(bytes, o + 30);
    const commentLen = u16(bytes, o + 32);
    let local = u32(bytes, o + 42);
    const name = new TextDecoder().decode(bytes.subarray(o + 46, o + 46 + nameLen));
    // Zip64 extra field (id 1): the 0xffffffff fields, in the order usize, csize, offset.
    for (let e = o + 46 + nameLen; e < o + 46 + nameLen + extraLen;) {
      const id = u16(bytes, e);
      const len = u16(bytes, e + 2);
      if (id === 1) {
        let p = e + 4;
        if (usize === 0xffffffff) {
          usize = u64(bytes, p);
          p += 8;
        }
        if (csize === 0xffffffff) {
          csize = u64(bytes, p);
          p += 8;
        }
        if (local === 0xffffffff) local = u64(bytes, p);
      }
      e += 4 + len;
    }
    o += 46 + nameLen + extraLen + commentLen;
    if (u32(bytes, local) !== 0x04034b50) throw new NpzError(`${name}: bad local header`);
    const start = local + 30 + u16(bytes, local + 26) + u16(bytes, local + 28);
    const raw = bytes.subarray(start, start + csize);
    let data: Uint8Array;
    if (method === 0) data = raw;
    else if (method === 8) {
      if (!inflateRaw) throw new NpzError(`${name}: compressed member, no inflater`);
      data = inflateRaw(raw);
    } else throw new NpzError(`${name}: unsupported zip method ${method}`);
    if (data.length !== usize) throw new NpzError(`${name}: ${data.length} bytes, expected ${usize}`);
    out.set(name.replace(/\.npy$/, ''), parseNpy(data, name));
  }
  return out;
}

const READERS: Record<string, [number, (v: DataView, o: number) => number]> = {
  '<f8': [8, (v, o) => v.getFloat64(o, true)],
  '<f4': [4, (v, o) => v.getFloat32(o, true)],
  '<i8': [8, (v, o) => Number(v.getBigInt64(o, true))],
  '<i4': [4, (v, o) => v.getInt32(o, true)],
  '<i2': [2, (v, o) => v.getInt16(o, true)],
  '<u8': [8, (v, o) => Number(v.getBigUint64(o, true))],
  '<u4': [4, (v, o) => v.getUint32(o, true)],
  '<u2': [2, (v, o) => v.getUint16(o, true)],
  '|u1': [1, (v, o) => v.getUint8(o)],
  '|i1': [1, (v, o) => v.getInt8(o)],
};

export function parseNpy(b: Uint8Array, name: string): NpyArray {
  if (b.length < 10 || b[0] !== 0x93 || new TextDecoder().decode(b.subarray(1, 6)) !== 'NUMPY')
    throw new NpzError(`${name}: not a .npy array`);
  const major = b[6];
  const hlen = major === 1 ? u16(b, 8) : u32(b, 8);
  const hstart = major === 1 ? 10 : 12;
  const header = new TextDecoder().decode(b.subarray(hstart, hstart + hlen));
  const descr = /'descr':\s*'([^']+)'/.exec(header)?.[1];
  const fortran = /'fortran_order':\s*True/.test(header);
  const shapeText = /'shape':\s*\(([^)]*)\)/.exec(header)?.[1];
  if (descr === undefined || shapeText === undefined)
    throw new NpzError(`${name}: unreadable header ${header.trim()}`);
  const reader = READERS[descr];
  if (reader === undefined) throw new NpzError(`${name}: dtype ${descr} is not a little-endian number`);
  const shape = shapeText
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0)
    .map(Number);
  const n = shape.reduce((a, x) => a * x, 1);
  const [size, read] = reader;
  const off = hstart + hlen;
  if (b.length - off < n * size)
    throw new NpzError(`${name}: ${b.length - off} data bytes for ${n} values of ${descr}`);
  const view = new DataView(b.buffer, b.byteOffset + off, n * size);
  const data = new Float64Array(n);
  if (fortran && shape.length === 2) {
    // Column-major on disk: element (i, j) is at j · rows + i.
    const [rows, cols] = shape;
    for (let j = 0; j < cols; j++)
      for (let i = 0; i < rows; i++) data[i * cols + j] = read(view, (j * rows + i) * size);
  } else {
    if (fortran && shape.length > 2)
      throw new NpzError(`${name}: Fortran-order arrays of rank > 2 are not supported`);
    for (let k = 0; k < n; k++) data[k] = read(view, k * size);
  }
  return { shape, data };
}
