// A scoring server with the failure modes of a real network, on 127.0.0.1. Each mode has an
// expected answer from Arbiter; the fault and soak tests share this list.
import { createServer, type Server, type Socket } from 'node:net'
import type { TestContext } from './build-app.js'

export const FAULT_MODES = ['ok', 'latency', 'drip', 'reset-mid-body', 'black-hole', 'close-at-once', 'html', 'flap'] as const
export type FaultMode = typeof FAULT_MODES[number]

/** What Arbiter must answer for each mode: 200, or a 502 with this code. */
export const EXPECTED: Record<Exclude<FaultMode, 'flap'>, { status: 200 } | { status: 502, code: string }> = {
  ok: { status: 200 },
  latency: { status: 200 },
  drip: { status: 502, code: 'ARB_ENDPOINT_TIMEOUT' },
  'reset-mid-body': { status: 502, code: 'ARB_ENDPOINT_CONNECTION_RESET' },
  'black-hole': { status: 502, code: 'ARB_ENDPOINT_TIMEOUT' },
  'close-at-once': { status: 502, code: 'ARB_ENDPOINT_CONNECTION_RESET' },
  html: { status: 502, code: 'ARB_ENDPOINT_NOT_JSON' }
}

const OK = '{"reward":0.75,"message":"ok"}'

export interface FaultyServer {
  /** Base URL; the mode is the path: `${url}/drip`. */
  url: string
  close: () => Promise<void>
}

/**
 * Raw TCP so that resets and half-answers are real. `flap` alternates ok and reset-mid-body.
 * Every socket is destroyed on close, and timers die with their sockets.
 */
export async function startFaultyServer (t?: TestContext, latencyMs = 30): Promise<FaultyServer> {
  const sockets = new Set<Socket>()
  let flaps = 0
  const server: Server = createServer((socket) => {
    sockets.add(socket)
    socket.on('close', () => sockets.delete(socket))
    socket.on('error', () => {})
    let buffered = ''
    socket.on('data', (chunk) => {
      buffered += chunk.toString('latin1')
      const headerEnd = buffered.indexOf('\r\n\r\n')
      if (headerEnd === -1) return
      const length = Number(/content-length:\s*(\d+)/i.exec(buffered.slice(0, headerEnd))?.[1] ?? 0)
      if (buffered.length < headerEnd + 4 + length) return
      // The mode is the first path segment, so a judge client's `/drip/chat/completions` works too.
      const path = /^POST\s+\/([^\s?/]*)/.exec(buffered)?.[1] ?? 'ok'
      buffered = buffered.slice(headerEnd + 4 + length)
      let mode = path as FaultMode
      if (mode === 'flap') mode = flaps++ % 2 === 0 ? 'ok' : 'reset-mid-body'
      answer(socket, mode, latencyMs)
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const url = `http://127.0.0.1:${(server.address() as { port: number }).port}`
  const close = async (): Promise<void> => {
    for (const socket of sockets) socket.destroy()
    await new Promise<void>((resolve) => server.close(() => resolve()))
  }
  t?.teardown(close)
  return { url, close }
}

function answer (socket: Socket, mode: FaultMode, latencyMs: number): void {
  const head = (length: number | undefined, type = 'application/json'): string =>
    `HTTP/1.1 200 OK\r\ncontent-type: ${type}\r\n${length === undefined ? 'transfer-encoding: chunked' : `content-length: ${length}`}\r\nconnection: keep-alive\r\n\r\n`
  switch (mode) {
    case 'ok':
      socket.write(head(OK.length) + OK)
      return
    case 'latency': {
      const timer = setTimeout(() => socket.write(head(OK.length) + OK), latencyMs)
      socket.once('close', () => clearTimeout(timer))
      return
    }
    case 'drip': {
      socket.write(head(1000))
      const timer = setInterval(() => socket.write(' '), 20)
      socket.once('close', () => clearInterval(timer))
      return
    }
    case 'reset-mid-body':
      socket.write(head(OK.length) + OK.slice(0, 8))
      setImmediate(() => socket.resetAndDestroy())
      return
    case 'black-hole':
      return
    case 'close-at-once':
      socket.resetAndDestroy()
      return
    case 'html': {
      const page = '<html><body>502 Bad Gateway</body></html>'
      socket.write(head(page.length, 'text/html') + page)
      return
    }
    case 'flap':
      return
  }
}
