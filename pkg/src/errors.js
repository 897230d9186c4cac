// The package's one error class. Every failure, from Rust or from this JS,
// reaches the caller as a StepscoreError whose `code` is stable (see
// index.d.ts for the list) and whose message names what is at fault.

export class StepscoreError extends Error {
  constructor(code, message, options) {
    super(message, options);
    this.name = 'StepscoreError';
    this.code = code;
  }
}

// Set once the wasm instance has trapped: its state can no longer be trusted.
let trapped = null;

/** Converts anything a wasm call threw into a StepscoreError. */
export function toStepscoreError(e) {
  if (e instanceof StepscoreError) return e;
  if (e && e.name === 'StepscoreError' && typeof e.code === 'string') {
    return new StepscoreError(e.code, e.message);
  }
  if (e instanceof WebAssembly.RuntimeError) {
    trapped = e;
    return new StepscoreError(
      'INTERNAL',
      `the wasm engine trapped (${e.message}); this is a bug in stepscore, its panic message ` +
        'is on the console. The engine cannot be used again in this page or process.',
      { cause: e },
    );
  }
  return new StepscoreError('INTERNAL', `unexpected error: ${e?.message ?? String(e)}`, { cause: e });
}

/** Runs a synchronous wasm call, rethrowing its failure as a StepscoreError. */
export function callWasm(fn) {
  if (trapped) {
    throw new StepscoreError('INTERNAL', `the wasm engine trapped earlier (${trapped.message}) and cannot be used`, {
      cause: trapped,
    });
  }
  try {
    return fn();
  } catch (e) {
    throw toStepscoreError(e);
  }
}

/**
 * What a failed fetch really met: the error's message followed by its
 * `cause` chain (undici's "fetch failed" hides `getaddrinfo ENOTFOUND
 * host` or `connect ECONNREFUSED` there), each with its `code`.
 */
export function causeText(e) {
  const parts = [];
  for (let c = e, depth = 0; c !== undefined && c !== null && depth < 8; c = c.cause, depth++) {
    // Node's happy-eyeballs connect failure is an AggregateError with no message of its own.
    let text = c.message || c.errors?.map((x) => x?.message).filter(Boolean).join('; ') || (typeof c === 'object' ? '' : String(c));
    if (c.code && !text.includes(c.code)) text = text ? `${text} (${c.code})` : c.code;
    if (text && !parts.includes(text)) parts.push(text);
  }
  return parts.join(': ') || 'unknown error';
}
