// AbortSignal handling shared by every long call: load, score, scoreMany,
// a session's append.

import { StepscoreError } from './errors.js';

function reasonText(reason) {
  return reason?.message ?? (reason === undefined ? 'no reason given' : String(reason));
}

export function abortError(signal, what = 'loading') {
  return new StepscoreError('ABORTED', `${what} was aborted: ${reasonText(signal.reason)}`, { cause: signal.reason });
}

/** Throws ABORTED when `signal` has fired. `what` names the call in the message. */
export function throwIfAborted(signal, what = 'loading') {
  if (signal?.aborted) throw abortError(signal, what);
}

/** `signal` must be an AbortSignal (or absent). */
export function checkSignal(signal, where) {
  if (signal !== undefined && signal !== null && !(typeof AbortSignal === 'function' && signal instanceof AbortSignal)) {
    throw new StepscoreError('INVALID_ARGUMENT', `${where}: \`signal\` must be an AbortSignal`);
  }
}

/** `promise`, rejected with ABORTED as soon as `signal` fires (its own result is then dropped). */
export function abortable(promise, signal, what) {
  if (!signal) return promise;
  if (signal.aborted) {
    promise.catch(() => undefined);
    return Promise.reject(abortError(signal, what));
  }
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      promise.catch(() => undefined);
      reject(abortError(signal, what));
    };
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (e) => {
        signal.removeEventListener('abort', onAbort);
        reject(e);
      },
    );
  });
}

/** Resolves on a later turn of the event loop, so an abort fired meanwhile is seen. */
export function nextTurn() {
  return new Promise((resolve) => setTimeout(resolve, 0));
}

/**
 * Resolves after the event loop has had a turn (not clamped as nested
 * setTimeouts are): a token loop awaits it so aborts, worker messages and
 * (on a page) painting get in between tokens.
 */
export function yieldToEvents() {
  if (typeof setImmediate === 'function') return new Promise((resolve) => setImmediate(resolve));
  return new Promise((resolve) => {
    const channel = new MessageChannel();
    channel.port1.onmessage = () => {
      channel.port1.close();
      resolve();
    };
    channel.port2.postMessage(null);
  });
}
