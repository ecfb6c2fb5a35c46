// client.mjs drives the TypeScript SDK v2 client (@modelcontextprotocol/client,
// protocol 2026-07-28) against an MCP endpoint and prints one JSON line per
// step for the Go test to check:
//
//   node client.mjs ENDPOINT SERVER_ORIGIN [PROXY_HOST:PORT]
//
// ENDPOINT is where MCP requests go (the server itself, or toolgate's
// reverse listener); SERVER_ORIGIN is the server, for its control endpoint;
// PROXY_HOST:PORT, when given, is an HTTP forward proxy every request goes
// through (absolute-form request targets, as curl and Go send them).
import http from 'node:http';
import { Readable } from 'node:stream';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';

const [endpoint, origin, proxy] = process.argv.slice(2);

// proxyFetch sends a fetch through the forward proxy with node:http.
function proxyFetch(input, init = {}) {
  const req = input instanceof Request ? input : new Request(input, init);
  const [host, port] = proxy.split(':');
  return new Promise((resolve, reject) => {
    req.arrayBuffer().then(buf => {
      const headers = {};
      req.headers.forEach((v, k) => { headers[k] = v; });
      const r = http.request({ host, port: Number(port), method: req.method, path: req.url, headers, signal: init.signal ?? req.signal }, res => {
        const h = new Headers();
        for (const [k, v] of Object.entries(res.headers)) h.set(k, Array.isArray(v) ? v.join(', ') : v);
        const body = res.statusCode === 204 || res.statusCode === 202 && res.headers['content-length'] === '0' ? null : Readable.toWeb(res);
        resolve(new Response(body, { status: res.statusCode, headers: h }));
      });
      r.on('error', reject);
      if (buf.byteLength > 0) r.write(Buffer.from(buf));
      r.end();
    }, reject);
  });
}
const fetchVia = proxy ? proxyFetch : fetch;

const out = o => console.log(JSON.stringify(o));
const text = r => (r.content ?? []).filter(c => c.type === 'text').map(c => c.text).join('');
const summary = r => ({ isError: !!r.isError, text: text(r), structured: r.structuredContent ?? null });

const client = new Client({ name: 'agent-ts', version: '2.0.0' }, {
  versionNegotiation: { mode: 'auto' },
  capabilities: { elicitation: { form: {} } },
});
client.setRequestHandler('elicitation/create', async () => ({ action: 'accept', content: { name: 'ada' } }));
let changed = 0;
client.setNotificationHandler('notifications/tools/list_changed', async () => { changed++; });
await client.connect(new StreamableHTTPClientTransport(new URL(endpoint), { fetch: fetchVia }));
out({ step: 'connect', version: client.getNegotiatedProtocolVersion() });

const call = async (name, args) => summary(await client.callTool({ name, arguments: args }));
out({ step: 'valid', ...await call('create_issue', { title: 'Crash on save', labels: ['bug'], assignee: { login: 'ada', team: { id: 7 } } }) });
out({ step: 'typo_top', ...await call('create_issue', { title: 'x', lables: ['bug'] }) });
out({ step: 'typo_nested', ...await call('create_issue', { title: 'x', assignee: { login: 'ada', team: { nmae: 'core' } } }) });
out({ step: 'wrong_type', ...await call('create_issue', { title: 'x', assignee: { login: 'ada', team: { id: 'seven' } } }) });

// A streamed answer: progress arrives while the handler is held.
let progressed = false, done = false;
const pending = client.callTool({ name: 'slow_report', arguments: { pages: 2 } }, {
  onprogress: async () => {
    progressed = true;
    const early = !done;
    await fetch(origin + '/control/release', { method: 'POST' });
    out({ step: 'progress', beforeResult: early });
  },
});
const rep = await pending;
done = true;
out({ step: 'stream', progressed, ...summary(rep) });

// MRTR: the server asks for input; the SDK answers and retries.
out({ step: 'mrtr', ...await call('confirm', { ticket: 'T-1' }) });

// tools/list_changed on a subscriptions/listen stream.
const sub = await client.listen({ toolsListChanged: true });
out({ step: 'listen', honored: sub.honoredFilter });
out({ step: 'flip', ...await call('flip_tools', {}) });
for (let i = 0; i < 200 && changed === 0; i++) await new Promise(r => setTimeout(r, 25));
out({ step: 'changed', count: changed });
out({ step: 'extra_typo', ...await call('extra', { noet: 'x' }) });
out({ step: 'extra_valid', ...await call('extra', { note: 'x' }) });
await sub.close();

// A header/body mismatch, sent by hand: Mcp-Name says one tool, the body another.
const meta = {
  'io.modelcontextprotocol/protocolVersion': '2026-07-28',
  'io.modelcontextprotocol/clientInfo': { name: 'agent-ts', version: '2.0.0' },
  'io.modelcontextprotocol/clientCapabilities': {},
};
const resp = await fetchVia(endpoint, {
  method: 'POST',
  headers: {
    'Content-Type': 'application/json', Accept: 'application/json, text/event-stream',
    'MCP-Protocol-Version': '2026-07-28', 'Mcp-Method': 'tools/call', 'Mcp-Name': 'flip_tools',
  },
  body: JSON.stringify({ jsonrpc: '2.0', id: 99, method: 'tools/call', params: { name: 'create_issue', arguments: { title: 'x' }, _meta: meta } }),
});
out({ step: 'mismatch', status: resp.status, body: await resp.text() });
out({ step: 'counts', counts: await (await fetch(origin + '/control/counts')).json() });
await client.close();
