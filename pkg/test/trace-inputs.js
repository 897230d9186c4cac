// One trace of each `TraceInput` shape, typed by index.d.ts (`npm run
// typecheck` checks this file against the published types) and read by the
// core in inputs.test.js: the types and what the core accepts cannot drift
// apart unnoticed.

/** @type {Array<[import('stepscore').RowFormat, import('stepscore').TraceInput]>} */
export const TRACE_INPUTS = [
  ['processbench', { problem: 'What is 2+2?', steps: ['2+2 = 4.', 'The answer is 4.'] }],
  ['native', { problem: 'What is 2+2?', steps: [{ text: '2+2 = 4.', label: true }, { text: 'The answer is 4.' }], id: 'own' }],
  ['raw', { problem: 'What is 2+2?', response: '2+2 = 4.\n\nThe answer is 4.', id: 'raw', referenceAnswer: '4' }],
  [
    'chat',
    {
      messages: [
        { role: 'user', content: 'What is 2+2?' },
        { role: 'assistant', content: '2+2 = 4.' },
        { role: 'assistant', content: 'The answer is 4.' },
      ],
      id: 'chat',
    },
  ],
];

/** Every role the types allow: a Record over the union, so a role added to or dropped from the types fails typecheck here. */
/** @type {Record<import('stepscore').ChatMessage['role'], true>} */
export const CHAT_ROLES = { system: true, developer: true, user: true, human: true, assistant: true, tool: true, function: true, ipython: true };
