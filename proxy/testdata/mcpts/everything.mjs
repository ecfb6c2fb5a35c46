// everything.mjs runs @modelcontextprotocol/server-everything (the MCP
// reference server, on the TypeScript SDK v1, pinned by package-lock.json)
// over streamable HTTP on 127.0.0.1, the way its own streamableHttp
// transport does (one session per initialize, resumable streams) but on a
// free port of the loopback address only: the package's own entry listens
// on every address. It prints "listening <port>" once ready, and counts the
// tools/call requests that reached it per tool, which GET /control/counts
// reports, so tests can prove a refused call never ran.
import { createServer as createHTTPServer } from 'node:http';
import { randomUUID } from 'node:crypto';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { InMemoryEventStore } from '@modelcontextprotocol/sdk/examples/shared/inMemoryEventStore.js';
import { createServer } from '@modelcontextprotocol/server-everything/dist/server/index.js';

const transports = new Map();
const counts = {};

async function readBody(req) {
  const chunks = [];
  for await (const c of req) chunks.push(c);
  return Buffer.concat(chunks).toString('utf8');
}

function count(msg) {
  for (const m of Array.isArray(msg) ? msg : [msg]) {
    if (m && m.method === 'tools/call' && m.params && typeof m.params.name === 'string') {
      counts[m.params.name] = (counts[m.params.name] ?? 0) + 1;
    }
  }
}

const srv = createHTTPServer(async (req, res) => {
  try {
    if (req.url === '/control/counts') {
      res.setHeader('Content-Type', 'application/json');
      res.end(JSON.stringify(counts));
      return;
    }
    const sid = req.headers['mcp-session-id'];
    let body;
    if (req.method === 'POST') {
      body = JSON.parse(await readBody(req));
      count(body);
    }
    let transport = sid ? transports.get(sid) : undefined;
    if (!transport) {
      if (sid || req.method !== 'POST') {
        res.writeHead(400, { 'Content-Type': 'application/json' });
        res.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message: 'Bad Request: No valid session ID provided' }, id: null }));
        return;
      }
      const { server, cleanup } = createServer();
      transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        eventStore: new InMemoryEventStore(),
        onsessioninitialized: id => { transports.set(id, transport); },
      });
      server.server.onclose = async () => {
        const id = transport.sessionId;
        if (id && transports.has(id)) { transports.delete(id); cleanup(id); }
      };
      await server.connect(transport);
    }
    await transport.handleRequest(req, res, body);
  } catch (err) {
    if (!res.headersSent) res.writeHead(500);
    res.end(String(err));
  }
});
srv.listen(0, '127.0.0.1', () => { console.log('listening ' + srv.address().port); });
process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
