// The pty_mcp tests' client: the official MCP SDK's Client over its
// Streamable HTTP transport, driving the server as an agent would.
//
//   node t/mcp/client.mjs <url> session|workers
//
// Prints one JSON object with what it saw; the .t files judge it.

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport }
    from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const [url, scenario] = process.argv.slice(2);
const seen = { workers: {} };

// every answer names its worker (X-Pty-Worker): count them
async function countingFetch(input, init) {
    const res = await fetch(input, init);
    const w = res.headers.get('x-pty-worker');
    if (w) seen.workers[w] = (seen.workers[w] || 0) + 1;
    return res;
}

async function connect() {
    const transport = new StreamableHTTPClientTransport(new URL(url),
        { fetch: countingFetch });
    const client = new Client({ name: 'ngx-pty-test', version: '1.0.0' });
    await client.connect(transport);
    return { client, transport };
}

async function call(client, name, args, opts) {
    try {
        const r = await client.callTool({ name, arguments: args }, undefined,
            opts);
        return {
            isError: !!r.isError,
            text: r.content && r.content[0] && r.content[0].text,
            data: r.structuredContent,
        };
    } catch (e) {
        return { thrown: true, code: e.code, message: String(e.message) };
    }
}

async function session() {
    const { client, transport } = await connect();
    seen.protocol = transport.protocolVersion;
    seen.server = client.getServerVersion();
    seen.instructions = client.getInstructions();

    const tools = await client.listTools();
    seen.tools = tools.tools.map((t) => ({
        name: t.name,
        input: !!t.inputSchema, output: !!t.outputSchema,
        description: t.description,
    }));

    seen.ping = await client.ping();

    const start = await call(client, 'pty_start',
        { command: 'python3', wait_for: '>>> ' });
    seen.start = start;
    const id = start.data && start.data.id;

    seen.write = await call(client, 'pty_write',
        { id, input: '2**64', submit: true, wait_for: '>>> ' });

    // a long wait: progress notifications on the stream, then the answer
    const progress = [];
    seen.slow = await call(client, 'pty_write',
        { id, input: 'import time; time.sleep(2.5); print("slept")',
          submit: true, wait_for: '>>> ' },
        { onprogress: (p) => progress.push(p) });
    seen.progress = progress;

    seen.read = await call(client, 'pty_read', { id });
    seen.typo = await call(client, 'pty_write', { id, waitfor: '>>> ' });
    seen.unknown = await call(client, 'pty_write',
        { id: 'pty-999999', input: 'x' });
    seen.list = await call(client, 'pty_list', { running: true });
    seen.kill = await call(client, 'pty_kill', { id });
    seen.after = await call(client, 'pty_write', { id, input: 'x' });
    seen.notool = await call(client, 'pty_nope', {});

    await client.close();
}

// one session through workers taken at random: every answer right
async function workers() {
    const { client } = await connect();

    const start = await call(client, 'pty_start',
        { command: 'python3', wait_for: '>>> ' });
    const id = start.data && start.data.id;
    seen.answers = [];

    for (let i = 1; i <= 12; i++) {
        const r = await call(client, 'pty_write',
            { id, input: `print(${i}*${i})`, submit: true,
              wait_for: '>>> ' });
        seen.answers.push(r.data ? r.data.output : r);
    }

    const progress = [];
    seen.slow = await call(client, 'pty_write',
        { id, input: 'import time; time.sleep(1.5)', submit: true,
          wait_for: '>>> ' },
        { onprogress: (p) => progress.push(p) });
    seen.progress = progress.length;

    seen.kill = await call(client, 'pty_kill', { id });

    // a second client, its own MCP session, sees the first's pty session
    const second = await connect();
    seen.list = await call(second.client, 'pty_list', { command: 'python3' });
    await second.client.close();
    await client.close();
}

try {
    await (scenario === 'workers' ? workers() : session());
} catch (e) {
    seen.error = String(e && e.stack || e);
}

process.stdout.write(JSON.stringify(seen) + '\n');
