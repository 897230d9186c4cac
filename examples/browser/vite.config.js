// Top-level await in main.js: the build targets browsers that have it.
export default { build: { target: 'es2022' } };
