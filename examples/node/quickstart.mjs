// The npm package's quickstart (pkg/README.md), as CI runs it after
// `npm install stepscore`: the fast PRM by its catalog name (downloaded from
// the hub once, checked by sha256, cached in ~/.cache/stepscore; HF_ENDPOINT
// names a mirror), one trace scored, the first step below the head's
// shipped threshold.
import { StepScorer } from 'stepscore';

const scorer = await StepScorer.load('stepscore-prm-smollm2');
const problem = 'Weng earns $12 an hour for babysitting. Yesterday, she just did 50 minutes of babysitting. How much did she earn?';
const response = 'Weng earns 12 / 60 = 0.2 dollars per minute.\n\nFor 50 minutes she earns 0.2 x 50 = 12 dollars.';
const { stepScores, tokens } = await scorer.score({ problem, response });
const { threshold, build, threads } = scorer.info();
console.log(JSON.stringify({ stepScores, tokens, threshold, firstError: scorer.firstError(stepScores), build, threads }));
scorer.dispose();
