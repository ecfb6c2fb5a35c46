// approval.mjs drives the TypeScript SDK v2 client (protocol 2026-07-28,
// URL-mode elicitation declared) through toolgate's in-band approval and
// prints one JSON line per step for the Go test:
//
//   node approval.mjs ENDPOINT SERVER_ORIGIN
//
// When toolgate asks for approval (a URL-mode elicitation inside an
// input_required result), it prints {"step":"ask","key":...,"url":...} and
// waits for one line on stdin: the action to answer ("accept", "decline"),
// which the test sends after a person decided (or not). The SDK's own
// Multi Round-Trip driver echoes toolgate's requestState on the retry.
import { createInterface } from 'node:readline';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';

const [endpoint, origin] = process.argv.slice(2);
const out = o => console.log(JSON.stringify(o));
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
const text = r => (r.content ?? []).filter(c => c.type === 'text').map(c => c.text).join('');

const client = new Client({ name: 'agent-ts', version: '2.0.0' }, {
  versionNegotiation: { mode: 'auto' },
  capabilities: { elicitation: { form: {}, url: {} } },
});
client.setRequestHandler('elicitation/create', async req => {
  const p = req.params ?? {};
  if (p.mode !== 'url') return { action: 'accept', content: { name: 'ada' } };
  out({ step: 'ask', mode: p.mode, url: p.url, message: p.message });
  const { value } = await lines.next();
  return { action: value.trim() };
});
await client.connect(new StreamableHTTPClientTransport(new URL(endpoint)));
out({ step: 'connect', version: client.getNegotiatedProtocolVersion() });

const call = async (step, name, args) => {
  try {
    const r = await client.callTool({ name, arguments: args });
    out({ step, isError: !!r.isError, text: text(r), structured: r.structuredContent ?? null });
  } catch (err) {
    out({ step, isError: true, text: 'threw: ' + String(err) });
  }
};
await call('approved', 'create_issue', { title: 'Crash on save' });
await call('denied', 'create_issue', { title: 'Crash on load' });
await call('mrtr', 'confirm', { ticket: 'T-9' });
out({ step: 'counts', counts: await (await fetch(origin + '/control/counts')).json() });
await client.close();
process.exit(0);
