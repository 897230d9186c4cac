// Example traces for the gallery: plain data (problem + response, cut into
// steps by the blank-line segmenter). What is wrong in each one is written in
// `note` for the reader; nothing here carries a score — the model gives those.

export type ExampleKind = 'correct' | 'arithmetic slip' | 'wrong operation' | 'logic error';

export interface Example {
  id: string;
  title: string;
  kind: ExampleKind;
  /** Where the error is, for people reading the gallery (1-based step). */
  note: string;
  problem: string;
  response: string;
}

export const EXAMPLES: Example[] = [
  {
    id: 'apples-correct',
    title: 'Apples at the market',
    kind: 'correct',
    note: 'Every step is right; the answer is 12.',
    problem: 'Maria buys 4 bags of apples with 6 apples in each bag. She gives 9 apples to her neighbour and eats 3. How many apples does she have left?',
    response: [
      'Maria starts with 4 bags of 6 apples, so she has 4 × 6 = 24 apples.',
      'She gives 9 apples to her neighbour, leaving 24 − 9 = 15 apples.',
      'She eats 3 apples, leaving 15 − 3 = 12 apples.',
      'The answer is \\boxed{12}.',
    ].join('\n\n'),
  },
  {
    id: 'train-correct',
    title: 'Train journey',
    kind: 'correct',
    note: 'Every step is right; the answer is 210 km.',
    problem: 'A train travels at 70 km/h for 2 hours and then at 35 km/h for 2 more hours. How far does it travel in total?',
    response: [
      'In the first 2 hours the train covers 70 × 2 = 140 km.',
      'In the next 2 hours it covers 35 × 2 = 70 km.',
      'The total distance is 140 + 70 = 210 km.',
      'The answer is \\boxed{210}.',
    ].join('\n\n'),
  },
  {
    id: 'books-slip',
    title: 'Library books',
    kind: 'arithmetic slip',
    note: 'Step 2 miscomputes 7 × 8 as 54 (it is 56); the error carries to the answer.',
    problem: 'A library has 7 shelves with 8 books on each shelf. It buys 15 more books. How many books does it have now?',
    response: [
      'The library has 7 shelves with 8 books on each.',
      'So it starts with 7 × 8 = 54 books.',
      'After buying 15 more books it has 54 + 15 = 69 books.',
      'The answer is \\boxed{69}.',
    ].join('\n\n'),
  },
  {
    id: 'cookies-operation',
    title: 'Sharing cookies',
    kind: 'wrong operation',
    note: 'Step 2 multiplies where the problem asks to divide (36 cookies shared by 4 friends).',
    problem: 'Tom bakes 3 trays of 12 cookies and shares them equally among 4 friends. How many cookies does each friend get?',
    response: [
      'Tom bakes 3 × 12 = 36 cookies.',
      'Sharing them among 4 friends, each friend gets 36 × 4 = 144 cookies.',
      'The answer is \\boxed{144}.',
    ].join('\n\n'),
  },
  {
    id: 'ages-logic',
    title: 'Ages of siblings',
    kind: 'logic error',
    note: 'Step 2 reads “3 years younger than Ben” as older; Ali is 9, not 15, and the sum is 33.',
    problem: 'Ben is 12 years old. Ali is 3 years younger than Ben, and Cleo is twice as old as Ali. What is the sum of their ages?',
    response: [
      'Ben is 12 years old.',
      'Ali is 3 years younger than Ben, so Ali is 12 + 3 = 15 years old.',
      'Cleo is twice as old as Ali, so Cleo is 2 × 15 = 30 years old.',
      'The sum of their ages is 12 + 15 + 30 = 57.',
      'The answer is \\boxed{57}.',
    ].join('\n\n'),
  },
];

export interface CandidateSet {
  id: string;
  title: string;
  problem: string;
  /** Candidate responses; which ones are right is for the reader only. */
  candidates: string[];
  note: string;
}

export const CANDIDATE_SETS: CandidateSet[] = [
  {
    id: 'pens-best-of-4',
    title: 'Pens in boxes (5 candidates)',
    note: 'Two candidates reach the right answer, 40; three make the same slip (5 × 10 = 45) and agree on 35, so a plain majority vote picks the wrong answer.',
    problem: 'A shop has 5 boxes of 10 pens. It sells 10 pens. How many pens are left?',
    candidates: [
      ['There are 5 × 10 = 50 pens at first.', 'The shop sells 10 pens, so 50 − 10 = 40 pens are left.', 'The answer is \\boxed{40}.'].join('\n\n'),
      ['5 boxes of 10 pens make 5 × 10 = 45 pens.', 'After selling 10 pens, 45 − 10 = 35 pens are left.', 'The answer is \\boxed{35}.'].join('\n\n'),
      ['The shop starts with 50 pens because 5 × 10 = 50.', 'It sells 10 of them.', '50 − 10 = 40, so the answer is \\boxed{40}.'].join('\n\n'),
      ['Each box has 10 pens and there are 5 boxes: 5 × 10 = 45.', 'Selling 10 leaves 45 − 10 = 35.', 'The answer is \\boxed{35}.'].join('\n\n'),
      ['Five boxes hold 45 pens.', 'The shop sells 10 pens, so 35 pens are left.', 'The answer is \\boxed{35}.'].join('\n\n'),
    ],
  },
];
