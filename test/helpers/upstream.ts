// A real HTTP server on 127.0.0.1 that a test scripts, standing in for a scoring endpoint.
// It records what it received so tests assert on the exchange, not on a mock.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo, Socket } from 'node:net'
import type { TestContext } from './build-app.js'

export interface Received {
  method: string
  url: string
  headers: IncomingMessage['headers']
  body: string
}

export type Handler = (request: IncomingMessage, response: ServerResponse, received: Received) => void | Promise<void>

export interface Upstream {
  url: string
  port: number
  received: Received[]
  /** TCP connections accepted so far: proves the egress guard opened no socket. */
  connections: () => number
  /** Replace the handler between requests. */
  handle: (handler: Handler) => void
  close: () => Promise<void>
}

export async function startUpstream (t: TestContext, handler: Handler): Promise<Upstream> {
  let current = handler
  const received: Received[] = []
  const sockets = new Set<Socket>()
  let accepted = 0
  const server = createServer((request, response) => {
    const chunks: Buffer[] = []
    request.on('data', (chunk: Buffer) => chunks.push(chunk))
    request.on('end', () => {
      const entry: Received = { method: request.method ?? '', url: request.url ?? '', headers: request.headers, body: Buffer.concat(chunks).toString('utf8') }
      received.push(entry)
      Promise.resolve(current(request, response, entry)).catch((error: unknown) => {
        response.destroy(error as Error)
      })
    })
  })
  server.on('connection', (socket) => { accepted++; sockets.add(socket); socket.on('close', () => sockets.delete(socket)) })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  const close = async (): Promise<void> => {
    for (const socket of sockets) socket.destroy()
    await new Promise<void>((resolve) => server.close(() => resolve()))
  }
  t.teardown(close)
  return { url: `http://127.0.0.1:${port}`, port, received, connections: () => accepted, handle: (next) => { current = next }, close }
}

/** Answers JSON with the given status. */
export function json (status: number, value: unknown, headers: Record<string, string> = {}): Handler {
  return (_request, response) => {
    response.writeHead(status, { 'content-type': 'application/json', ...headers })
    response.end(typeof value === 'string' ? value : JSON.stringify(value))
  }
}

export type ScriptStep = { status: number, json?: unknown, text?: string, headers?: Record<string, string> } | 'hang'

export interface SeenRequest {
  method: string
  url: string
  headers: IncomingMessage['headers']
  body: any
}

/**
 * Answers the n-th request with steps[n] (`'hang'` never answers; past the script a 599, so an
 * extra call fails loudly) and records each request in `seen` with its JSON body parsed.
 */
export function scripted (steps: ScriptStep[], seen: SeenRequest[] = []): Handler {
  return (_request, response, received) => {
    seen.push({ method: received.method, url: received.url, headers: received.headers, body: received.body === '' ? undefined : JSON.parse(received.body) })
    const step = steps[seen.length - 1] ?? { status: 599, text: 'script exhausted' }
    if (step === 'hang') return
    response.writeHead(step.status, { 'content-type': step.text === undefined ? 'application/json' : 'text/html', ...step.headers })
    response.end(step.text ?? JSON.stringify(step.json))
  }
}
