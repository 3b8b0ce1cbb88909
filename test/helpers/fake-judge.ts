// A real OpenAI-compatible chat-completions server on 127.0.0.1 for tests, scripted per test:
// each request takes the next step of the script (or asks a function), and every request is
// recorded (headers and parsed body) so tests can assert on what the judge actually received.
// When the script runs out it answers 599 so that an unexpected extra call fails loudly.
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'

export interface RecordedRequest {
  method: string
  url: string
  headers: IncomingHttpHeaders
  /** Parsed JSON body (undefined if it was not JSON). */
  body: any
  raw: string
}

export interface Step {
  /** HTTP status (default 200). */
  status?: number
  headers?: Record<string, string>
  /** Raw body to send as is (string) or as JSON (anything else); overrides content. */
  body?: unknown
  /** The assistant message content of a chat completion. */
  content?: string | null
  refusal?: string
  finishReason?: string
  /** The model the server reports (default "fake-judge-1"). */
  model?: string
  usage?: { prompt_tokens: number, completion_tokens: number, total_tokens: number }
  /** Never answer (the socket stays open until the server closes). */
  hang?: boolean
  /** Answer after this many milliseconds. */
  delayMs?: number
  /** Send the headers and a first byte of the body, then one more byte every this many ms, forever. */
  dripMs?: number
}

export type Script = Step[] | ((request: RecordedRequest, index: number) => Step)

export interface FakeJudge {
  /** Base URL as ARBITER_JUDGE_BASE_URL takes it, ending in /v1. */
  url: string
  requests: RecordedRequest[]
  /** The most requests the server was answering at the same time. */
  maxInFlight: () => number
  /** Replaces the script (and keeps the recorded requests). */
  script: (script: Script) => void
  close: () => Promise<void>
}

export function chatCompletion (step: Step): Record<string, unknown> {
  return {
    id: 'chatcmpl-fake',
    object: 'chat.completion',
    created: 1_700_000_000,
    model: step.model ?? 'fake-judge-1',
    choices: [{
      index: 0,
      message: { role: 'assistant', content: step.content === undefined ? null : step.content, ...(step.refusal === undefined ? {} : { refusal: step.refusal }) },
      finish_reason: step.finishReason ?? 'stop'
    }],
    usage: step.usage ?? { prompt_tokens: 100, completion_tokens: 20, total_tokens: 120 }
  }
}

export async function startFakeJudge (initial: Script = []): Promise<FakeJudge> {
  let script: Script = initial
  const requests: RecordedRequest[] = []
  let inFlight = 0
  let maxInFlight = 0
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (chunk: Buffer) => chunks.push(chunk))
    req.on('end', () => {
      inFlight++
      maxInFlight = Math.max(maxInFlight, inFlight)
      res.on('close', () => { inFlight-- })
      const raw = Buffer.concat(chunks).toString('utf8')
      let body: unknown
      try { body = JSON.parse(raw) } catch { body = undefined }
      const recorded: RecordedRequest = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, body, raw }
      const index = requests.length
      requests.push(recorded)
      const step: Step = typeof script === 'function'
        ? script(recorded, index)
        : script[index] ?? { status: 599, body: { error: { message: `fake judge: no step ${index} in the script` } } }
      if (step.hang === true) return
      if (step.dripMs !== undefined) {
        res.writeHead(200, { 'content-type': 'application/json' })
        res.write('{')
        const timer = setInterval(() => res.write(' '), step.dripMs)
        res.on('close', () => clearInterval(timer))
        return
      }
      const payload = step.body !== undefined
        ? (typeof step.body === 'string' ? step.body : JSON.stringify(step.body))
        : JSON.stringify(chatCompletion(step))
      const answer = (): void => {
        res.writeHead(step.status ?? 200, { 'content-type': 'application/json', ...step.headers })
        res.end(payload)
      }
      if (step.delayMs === undefined) answer()
      else setTimeout(answer, step.delayMs)
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}/v1`,
    requests,
    maxInFlight: () => maxInFlight,
    script: (next) => { script = next },
    close: async () => {
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    }
  }
}
