// A diverging colour scale split at the error threshold: red below it, blue
// above (ColorBrewer RdBu, readable for the common colour-vision deficiencies;
// every score is also printed as a number). Each side starts from its pale
// tint rather than white, so a score near the threshold still shows which side
// it is on and never looks unscored (unscored is grey).

type Rgb = [number, number, number];
const LOW: Rgb = [178, 24, 43];
const PALE_LOW: Rgb = [244, 165, 130];
const PALE_HIGH: Rgb = [146, 197, 222];
const HIGH: Rgb = [33, 102, 172];

function mix(a: Rgb, b: Rgb, t: number): Rgb {
  return [0, 1, 2].map((i) => Math.round(a[i] + (b[i] - a[i]) * t)) as Rgb;
}

/** The colour of `score` in [0, 1] when `threshold` is the neutral point. */
export function scoreColor(score: number | null, threshold: number): string {
  if (score === null || !Number.isFinite(score)) return 'rgb(150, 150, 150)';
  const s = Math.min(1, Math.max(0, score));
  const t = Math.min(0.999, Math.max(0.001, threshold));
  const c = s < t ? mix(LOW, PALE_LOW, s / t) : mix(PALE_HIGH, HIGH, (s - t) / (1 - t));
  return `rgb(${c[0]}, ${c[1]}, ${c[2]})`;
}

/** A translucent tint of the same scale, for shading text. */
export function scoreTint(score: number | null, threshold: number, alpha = 0.35): string {
  return scoreColor(score, threshold).replace('rgb(', 'rgba(').replace(')', `, ${alpha})`);
}

/** CSS gradient of the scale, changing side at `threshold`. */
export function scaleGradient(threshold: number): string {
  const t = Math.round(Math.min(1, Math.max(0, threshold)) * 100);
  return `linear-gradient(to right, rgb(${LOW.join(',')}) 0%, rgb(${PALE_LOW.join(',')}) ${t}%, rgb(${PALE_HIGH.join(',')}) ${t}%, rgb(${HIGH.join(',')}) 100%)`;
}

/** A step that is certainly wrong (exact arithmetic proves it false): the scale's red end. */
export const WRONG_COLOR = `rgb(${LOW.join(', ')})`;
