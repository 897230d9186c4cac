// The dense-reward chart (Chart.js): step scores and the running aggregate
// as lines on [0, 1], progress differences r_k = v_k - v_{k-1} as bars on
// their own [-1, 1] axis, the threshold as a dashed line and the first error
// as a large triangle.
import {
  BarController,
  BarElement,
  CategoryScale,
  Chart,
  Legend,
  LinearScale,
  LineController,
  LineElement,
  PointElement,
  Tooltip,
  type ChartConfiguration,
} from 'chart.js';
import { scoreColor } from './color';

Chart.register(BarController, BarElement, CategoryScale, Legend, LinearScale, LineController, LineElement, PointElement, Tooltip);

export interface Series {
  scores: Array<number | null>;
  progress: Array<number | null>;
  running: Array<number | null>;
  aggregationLabel: string;
  threshold: number;
  firstError: number;
}

let chart: Chart | null = null;
const RUNNING_WIDTH = 7;

function config(s: Series): ChartConfiguration {
  const labels = s.scores.map((_, i) => `Step ${i + 1}`);
  const n = labels.length;
  return {
    type: 'line',
    data: {
      labels,
      datasets: [
        {
          type: 'line',
          label: 'Step score',
          data: s.scores,
          yAxisID: 'y',
          borderColor: '#1c1c1c',
          // Steps after the first error rest on it: drawn in the error's red, whatever their score.
          backgroundColor: s.scores.map((v, i) => (s.firstError >= 0 && i > s.firstError ? 'rgba(178, 24, 43, 0.45)' : scoreColor(v, s.threshold))),
          pointRadius: s.scores.map((_, i) => (i === s.firstError ? 9 : 5)),
          pointStyle: s.scores.map((_, i) => (i === s.firstError ? 'triangle' : s.firstError >= 0 && i > s.firstError ? 'rectRot' : 'circle')),
          pointBorderColor: s.scores.map((_, i) => (i === s.firstError ? '#b2182b' : '#1c1c1c')),
          pointBorderWidth: s.scores.map((_, i) => (i === s.firstError ? 3 : 1)),
          spanGaps: false,
          order: 1,
        },
        {
          type: 'line',
          label: `Running ${s.aggregationLabel}`,
          data: s.running,
          yAxisID: 'y',
          // A wide translucent orange band under the score line: visible where the two coincide
          // (a running min often equals the score) and off the x-axis when it runs near 0, where a
          // thin dashed line vanished.
          borderColor: 'rgba(230, 97, 1, 0.6)',
          backgroundColor: 'rgb(230, 97, 1)',
          borderWidth: RUNNING_WIDTH,
          pointRadius: 0,
          order: 2,
        },
        {
          type: 'bar',
          label: 'Progress (score − previous score)',
          data: s.progress,
          yAxisID: 'y1',
          backgroundColor: s.progress.map((v) => (v !== null && v < 0 ? 'rgba(178, 24, 43, 0.35)' : 'rgba(33, 102, 172, 0.35)')),
          order: 3,
        },
        {
          type: 'line',
          label: 'Threshold',
          data: Array(n).fill(s.threshold),
          yAxisID: 'y',
          borderColor: '#b2182b',
          borderDash: [6, 4],
          borderWidth: 1.5,
          pointRadius: 0,
          order: 0,
        },
      ],
    },
    options: {
      animation: false,
      responsive: true,
      maintainAspectRatio: false,
      interaction: { mode: 'index', intersect: false },
      scales: {
        // A margin under 0 and over 1 keeps lines at 0 or 1 off the axes; ticks stay on [0, 1].
        y: { min: -0.06, max: 1.06, title: { display: true, text: 'score' }, afterBuildTicks: (axis) => { axis.ticks = [0, 0.2, 0.4, 0.6, 0.8, 1].map((value) => ({ value })); } },
        y1: { min: -1.12, max: 1.12, position: 'right', grid: { drawOnChartArea: false }, title: { display: true, text: 'progress' }, afterBuildTicks: (axis) => { axis.ticks = [-1, -0.5, 0, 0.5, 1].map((value) => ({ value })); } },
      },
      plugins: { legend: { position: 'bottom', labels: { boxWidth: 14 } } },
    },
  };
}

/** Records how far the running line stays above the plot's bottom edge (px), after every render (resizes too). */
function recordRunningGap(c: Chart, running: Array<number | null>): void {
  const canvas = c.canvas;
  const bottom = c.chartArea?.bottom;
  const ys = c.getDatasetMeta(1).data.map((p, i) => (running[i] === null ? null : p.y)).filter((y): y is number => typeof y === 'number' && Number.isFinite(y));
  if (bottom !== undefined && c.chartArea.height > 0 && ys.length) canvas.dataset.runningGap = (bottom - Math.max(...ys)).toFixed(1);
  else delete canvas.dataset.runningGap;
  canvas.dataset.runningWidth = String(RUNNING_WIDTH);
}

export function drawChart(canvas: HTMLCanvasElement, s: Series): void {
  chart?.destroy();
  const cfg = config(s);
  cfg.plugins = [{ id: 'running-gap', afterRender: (c: Chart) => recordRunningGap(c, s.running) }];
  chart = new Chart(canvas, cfg);
}
