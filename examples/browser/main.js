// The npm package in a page, bundled by Vite (`npx vite build`): the fast
// PRM by its catalog name, scored in a Web Worker (the page never blocks),
// downloaded once into Cache Storage and checked by sha256. `?hub=URL`
// points env.remoteHost at a mirror (CI's local hub server).
import { StepScorer, env } from 'stepscore';

const status = document.getElementById('status');
const hub = new URLSearchParams(location.search).get('hub');
if (hub) env.remoteHost = hub;

try {
  const scorer = await StepScorer.load({
    model: 'stepscore-prm-smollm2',
    worker: true,
    onProgress: ({ phase, loaded, total }) => {
      status.textContent = `${phase} ${total ? Math.round((100 * loaded) / total) + '%' : ''}`;
    },
  });
  const problem = 'Weng earns $12 an hour for babysitting. Yesterday, she just did 50 minutes of babysitting. How much did she earn?';
  const response = 'Weng earns 12 / 60 = 0.2 dollars per minute.\n\nFor 50 minutes she earns 0.2 x 50 = 12 dollars.';
  const { stepScores, tokens } = await scorer.score({ problem, response });
  const { threshold, worker, backend } = scorer.info();
  const result = { stepScores, tokens, threshold, firstError: scorer.firstError(stepScores), worker, backend };
  document.getElementById('out').textContent = JSON.stringify(result);
  status.textContent = 'done';
  window.stepscoreResult = result;
  scorer.dispose();
} catch (e) {
  status.textContent = `failed: ${e.code ?? ''} ${e.message}`;
  window.stepscoreError = `${e.code ?? ''} ${e.message}`;
}
