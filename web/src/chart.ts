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
          borderColor: '#7b3294',
          borderDash: [2, 3],
          pointRadius: 2,
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
        y: { min: 0, max: 1, title: { display: true, text: 'score' } },
        y1: { min: -1, max: 1, position: 'right', grid: { drawOnChartArea: false }, title: { display: true, text: 'progress' } },
      },
      plugins: { legend: { position: 'bottom', labels: { boxWidth: 14 } } },
    },
  };
}

export function drawChart(canvas: HTMLCanvasElement, s: Series): void {
  chart?.destroy();
  chart = new Chart(canvas, config(s));
}
