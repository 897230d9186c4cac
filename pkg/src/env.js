// Settings shared by every load, as transformers.js' `env`: where catalog
// names are downloaded from, and (Node) where their files are cached.

export const env = {
  /** The hub's origin; a catalog entry's file is `${remoteHost}/${repo}/resolve/${revision}/${file}`. */
  remoteHost: 'https://huggingface.co',
  /** Node: the directory catalog files are cached in (default: the core's, see node-files.js). */
  cacheDir: null,
};
