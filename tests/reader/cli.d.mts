// Types of cli.mjs for the TypeScript suites that import it (web/e2e).
export const ROOT: string;
export interface ReadOut {
  records: unknown[];
  errors: unknown[];
}
export function fixtures(): Array<{ name: string; text: string }>;
export function cliRead(name: string, extra?: string[]): ReadOut;
export function buildCli(): void;
export function checkCoverage(results: Array<{ records: Array<{ format: string }>; errors: unknown[] }>): void;
