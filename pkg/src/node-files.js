// Node's host hooks (runtime.js): local paths as `file:` URLs, and the
// catalog's download cache on disk, in the directory the CLI and Python
// use, so a file `stepscore fetch` put there is not downloaded again.
import { createHash, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readFile, mkdir, rename, rm, stat, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { isAbsolute, join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { StepscoreError } from './errors.js';
import { env } from './env.js';

/** The core's rule (`stepscore::catalog::cache_dir`): $STEPSCORE_CACHE, $XDG_CACHE_HOME/stepscore, ~/.cache/stepscore. */
function cacheDir() {
  if (env.cacheDir) return env.cacheDir;
  const e = process.env;
  if (e.STEPSCORE_CACHE) return e.STEPSCORE_CACHE;
  if (e.XDG_CACHE_HOME) return join(e.XDG_CACHE_HOME, 'stepscore');
  const home = e.HOME || homedir();
  return home ? join(home, '.cache', 'stepscore') : null;
}

function sha256(bytes) {
  return createHash('sha256').update(bytes).digest('hex');
}

/**
 * A catalog entry's file: the cached copy when its size and sha256 are the
 * catalog's, else `fetchFile()`'s bytes (its sources, checked against the
 * same pins), written under a temporary name and renamed into place, so no
 * partial or wrong file is ever in the cache under the entry's name.
 */
async function catalogFile(entry, fetchFile, downloader) {
  const dir = cacheDir();
  const { file_name: name, size, sha256: want } = entry.file;
  const path = dir ? join(dir, name) : null;
  if (path && existsSync(path)) {
    // A copy of another size is not read at all.
    const bytes = (await stat(path)).size === size ? await readFile(path) : null;
    if (bytes && sha256(bytes) === want) {
      downloader.progress({ phase: 'download', file: name, loaded: size, total: size, cached: true });
      return { bytes, path };
    }
    // Damaged or from another version: fetch it again.
    await rm(path, { force: true });
  }
  const bytes = await fetchFile();
  if (!path) return { bytes, path: null };
  const part = `${path}.part-${process.pid}-${randomBytes(4).toString('hex')}`;
  try {
    await mkdir(dir, { recursive: true });
    await writeFile(part, bytes);
    await rename(part, path);
  } catch (e) {
    await rm(part, { force: true });
    throw new StepscoreError('IO_ERROR', `caching ${name} in ${dir}: ${e?.message ?? e} (set STEPSCORE_CACHE or env.cacheDir to a writable directory)`, { cause: e });
  }
  return { bytes, path };
}

/** `spec` as a file: URL when it names an existing file or directory (relative to the working directory). */
function localFile(spec) {
  const path = isAbsolute(spec) ? spec : resolve(spec);
  return existsSync(path) ? pathToFileURL(path).href : null;
}

/** Reads a file: URL (null for a missing file when `optional`). */
async function readLocal(url, optional) {
  try {
    return new Uint8Array(await readFile(new URL(url)));
  } catch (e) {
    if (optional && e?.code === 'ENOENT') return null;
    throw new StepscoreError('IO_ERROR', `${new URL(url).pathname}: ${e?.message ?? e}`, { cause: e });
  }
}

export function nodeHost() {
  // The hub's own clients read HF_ENDPOINT for a mirror, pip PIP_INDEX_URL
  // for an index; so does the package in Node, as the CLI does.
  const setting = (name) => (process.env[name]?.trim() ? process.env[name].trim() : null);
  env.remoteHost = setting('HF_ENDPOINT') ?? env.remoteHost;
  env.pypiIndex = setting('PIP_INDEX_URL') ?? env.pypiIndex;
  return { localFile, readLocal, catalogStore: catalogFile, cacheDir };
}
