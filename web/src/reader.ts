// Trace files are read by the package's readTraces: the core's one reader
// (crates/stepscore/src/io), so the demo takes every row format the CLI
// takes and reports bad rows with the CLI's messages (`stepscore read`
// prints the same records and errors). This module only names the shapes
// the app keeps.
import { readTraces, type ReadResult, type RowFormat, type Trace } from 'stepscore';

export type Role = 'system' | 'user' | 'assistant' | 'tool_call' | 'tool_result';

/** A step as the app holds it (from a file, the segmenter or a share link). */
export interface AppStep {
  text: string;
  /** Ground truth when the source gives it: true correct, false wrong. */
  label?: boolean | null;
  /** A score that came with the file (shown until the model rescoring replaces it). */
  score?: number | null;
  role?: Role;
  tool?: string;
}

/** A trace read from a file, with the row format it was read as. */
export type AppTrace = Trace & { format: RowFormat };

/** The demo's path for a file: what readTraces makes of its text. */
export function readTraceFile(text: string, name: string, segmenter: string): ReadResult {
  return readTraces(text, { name, segmenter });
}
