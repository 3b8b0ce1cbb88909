// The soak: a bounded, loopback-only mixed load across every kind, with failing verifiers,
// network faults and plugin workers killed from outside, against the built server as a child
// process. It passes only when every request got exactly one answer, the server's own counters
// agree with the client's, and file descriptors, worker processes and memory come back down.
// With `shutdownAfterS` it sends SIGTERM mid-load instead and checks that no request the server
// accepted was cut off, and that the process exits 0.
import { spawn, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { readdirSync, readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { Pool } from 'undici'
import { startFaultyServer } from '../helpers/faulty-server.js'
import { startFakeJudge, type RecordedRequest, type Step } from '../helpers/fake-judge.js'
import { freePort } from '../helpers/ports.js'

const ROOT = fileURLToPath(new URL(import.meta.url.includes('/dist/') ? '../../../' : '../../', import.meta.url))
const SERVER_JS = `${ROOT}dist/src/server.js`
const PLUGINS = `${ROOT}test/fixtures/soak-plugins`
const RUBRICS = `${ROOT}examples/rubrics`

export interface SoakOptions {
  durationS: number
  concurrency: number
  seed: number
  /** Kill a random plugin worker from outside this often (0: never). */
  killEveryMs: number
  /** Send SIGTERM this many seconds in (the shutdown-under-load run). */
  shutdownAfterS?: number
  log?: (line: string) => void
}

interface Scenario {
  name: string
  route: '/v1/verify' | '/v1/verify/batch'
  weight: number
  body: (n: number) => unknown
  /** Allowed answers: "200", or "502:CODE"; 503 (overload, draining) is always allowed. */
  expect: string[]
}

export interface SoakReport {
  options: SoakOptions
  durationMs: number
  sent: number
  answered: number
  byStatus: Record<string, number>
  byScenario: Record<string, Record<string, number>>
  connectionErrors: Record<string, number>
  timeouts: number
  unexpected: string[]
  faultsInjected: { workerKills: number, networkFaultRequests: number, failingVerifierRequests: number }
  serverCounts?: Record<string, number>
  resources?: { start: Resources, end: Resources }
  exitCode?: number | null
  cutOffAccepted?: number
  violations: string[]
}

interface Resources { rssMiB: number, fds: number, workers: number }

// A tiny seeded generator (mulberry32): the same seed gives the same request mix.
function random (seed: number): () => number {
  let state = seed >>> 0
  return () => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}


function descendants (pid: number): number[] {
  const children = new Map<number, number[]>()
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8')
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
      const list = children.get(ppid) ?? []
      list.push(Number(entry))
      children.set(ppid, list)
    } catch { /* the process ended while we looked */ }
  }
  const found: number[] = []
  const queue = [pid]
  while (queue.length > 0) {
    for (const child of children.get(queue.shift() as number) ?? []) { found.push(child); queue.push(child) }
  }
  return found
}

function resources (pid: number): Resources {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  const rssKiB = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0)
  return { rssMiB: Math.round(rssKiB / 1024), fds: readdirSync(`/proc/${pid}/fd`).length, workers: descendants(pid).length }
}

function judgeAnswer (request: RecordedRequest): Step {
  const prompt = JSON.stringify(request.body?.messages ?? '')
  if (prompt.includes('JUDGE-GARBAGE')) return { content: 'I would rather not answer in JSON.' }
  if (prompt.includes('JUDGE-DOWN')) return { status: 500, body: { error: 'overloaded' } }
  const dimensions = prompt.includes('working') ? ['correctness', 'working'] : ['overall']
  const names = request.body?.response_format?.json_schema?.schema?.properties?.dimension_scores?.items?.properties?.dimension?.enum as string[] | undefined
  return {
    content: JSON.stringify({
      dimension_scores: (names ?? dimensions).map((dimension) => ({ dimension, reason: 'checked', unmet_criteria: [], score: 0.9 })),
      evidence: ['the answer is stated'],
      confidence: 0.8
    }),
    usage: { prompt_tokens: 100, completion_tokens: 20, total_tokens: 120 }
  }
}

function scenarios (faultyUrl: string): Scenario[] {
  const task = { prompt: 'What is 2+2?', reference: '4' }
  const plugin = (name: string, ref: string, extra: Record<string, unknown> = {}) => ({ name, version: '1.0.0', verifier: { kind: 'plugin', ref, ...extra } })
  const endpoint = (mode: string) => ({ verifier: { kind: 'endpoint', ref: `${faultyUrl}/${mode}`, timeout_s: 0.5 } })
  const rubric = { verifier: { kind: 'rubric', ref: 'alice/arithmetic-correctness' } }
  const crashed = '502:ARB_PLUGIN_CRASHED' // a worker killed from outside mid-call
  // The chaos plugins share two workers with verifiers that hang and leak: a call queued behind
  // one of those may reach its own deadline first.
  const timedOut = '502:ARB_PLUGIN_TIMEOUT'
  return [
    { name: 'endpoint ok', route: '/v1/verify', weight: 4, body: () => ({ manifest: endpoint('ok'), task, trajectory: '4' }), expect: ['200'] },
    { name: 'endpoint latency', route: '/v1/verify', weight: 2, body: () => ({ manifest: endpoint('latency'), task, trajectory: '4' }), expect: ['200'] },
    { name: 'endpoint drip', route: '/v1/verify', weight: 1, body: () => ({ manifest: endpoint('drip'), task, trajectory: '4' }), expect: ['502:ARB_ENDPOINT_TIMEOUT'] },
    { name: 'endpoint reset', route: '/v1/verify', weight: 1, body: () => ({ manifest: endpoint('reset-mid-body'), task, trajectory: '4' }), expect: ['502:ARB_ENDPOINT_CONNECTION_RESET'] },
    { name: 'endpoint black hole', route: '/v1/verify', weight: 1, body: () => ({ manifest: endpoint('black-hole'), task, trajectory: '4' }), expect: ['502:ARB_ENDPOINT_TIMEOUT'] },
    { name: 'endpoint closes at once', route: '/v1/verify', weight: 1, body: () => ({ manifest: endpoint('close-at-once'), task, trajectory: '4' }), expect: ['502:ARB_ENDPOINT_CONNECTION_RESET'] },
    { name: 'endpoint html', route: '/v1/verify', weight: 1, body: () => ({ manifest: endpoint('html'), task, trajectory: '4' }), expect: ['502:ARB_ENDPOINT_NOT_JSON'] },
    { name: 'endpoint flapping', route: '/v1/verify', weight: 1, body: () => ({ manifest: endpoint('flap'), task, trajectory: '4' }), expect: ['200', '502:ARB_ENDPOINT_CONNECTION_RESET'] },
    { name: 'plugin python ok', route: '/v1/verify', weight: 4, body: (n) => ({ manifest: plugin('arithmetic', 'verify:score_arithmetic'), task, trajectory: n % 2 === 0 ? '4' : '5' }), expect: ['200', crashed] },
    { name: 'plugin python raises', route: '/v1/verify', weight: 1, body: () => ({ manifest: plugin('arithmetic', 'strict:score'), task: { prompt: 'x' }, trajectory: '4' }), expect: ['502:ARB_PLUGIN_RAISED', crashed] },
    { name: 'plugin python noise', route: '/v1/verify', weight: 1, body: () => ({ manifest: plugin('chaos', 'chaos:noise'), task, trajectory: '4' }), expect: ['200', crashed, timedOut] },
    { name: 'plugin python crash', route: '/v1/verify', weight: 1, body: () => ({ manifest: plugin('chaos', 'chaos:crash'), task, trajectory: '4' }), expect: [crashed, timedOut] },
    { name: 'plugin python hang', route: '/v1/verify', weight: 1, body: () => ({ manifest: plugin('chaos', 'chaos:hang', { timeout_s: 0.5 }), task, trajectory: '4' }), expect: ['502:ARB_PLUGIN_TIMEOUT', crashed] },
    { name: 'plugin python leak', route: '/v1/verify', weight: 1, body: () => ({ manifest: plugin('chaos', 'chaos:leak', { timeout_s: 5 }), task, trajectory: '4' }), expect: [crashed, '502:ARB_PLUGIN_RAISED', timedOut] },
    { name: 'plugin js ok', route: '/v1/verify', weight: 2, body: () => ({ manifest: plugin('chaos-js', 'chaos:ok'), task, trajectory: '4' }), expect: ['200', crashed] },
    { name: 'plugin js crash', route: '/v1/verify', weight: 1, body: () => ({ manifest: plugin('chaos-js', 'chaos:crash'), task, trajectory: '4' }), expect: [crashed] },
    { name: 'plugin js hang', route: '/v1/verify', weight: 1, body: () => ({ manifest: plugin('chaos-js', 'chaos:hang', { timeout_s: 0.5 }), task, trajectory: '4' }), expect: ['502:ARB_PLUGIN_TIMEOUT', crashed] },
    { name: 'rubric ok', route: '/v1/verify', weight: 2, body: (n) => ({ manifest: rubric, task, trajectory: `The answer is 4 (${n})` }), expect: ['200'] },
    { name: 'rubric judge garbage', route: '/v1/verify', weight: 1, body: (n) => ({ manifest: rubric, task, trajectory: `JUDGE-GARBAGE ${n}` }), expect: ['502:ARB_JUDGE_UNUSABLE'] },
    { name: 'rubric judge down', route: '/v1/verify', weight: 1, body: (n) => ({ manifest: rubric, task, trajectory: `JUDGE-DOWN ${n}` }), expect: ['502:ARB_JUDGE_HTTP_STATUS'] },
    { name: 'malformed', route: '/v1/verify', weight: 1, body: () => ({ manifest: { verifier: { kind: 'builtin', ref: 'x' } }, task, trajectory: '4' }), expect: ['400'] },
    {
      name: 'batch of 8',
      route: '/v1/verify/batch',
      weight: 2,
      body: (n) => ({
        items: [
          { manifest: endpoint('ok'), task, trajectory: '4' },
          { manifest: endpoint('reset-mid-body'), task, trajectory: '4' },
          { manifest: plugin('arithmetic', 'verify:score_arithmetic'), task, trajectory: '4' },
          { manifest: plugin('chaos', 'chaos:crash'), task, trajectory: '4' },
          { manifest: plugin('chaos-js', 'chaos:ok'), task, trajectory: '4' },
          { manifest: rubric, task, trajectory: `batch ${n}` },
          { manifest: { verifier: { kind: 'nope', ref: 'x' } }, task, trajectory: '4' },
          { manifest: endpoint('html'), task, trajectory: '4' }
        ]
      }),
      expect: ['200']
    }
  ]
}

const FAILING = /drip|reset|black hole|closes|html|flapping/
const FAILING_VERIFIER = /raises|crash|hang|leak|garbage|down/

export async function runSoak (options: SoakOptions): Promise<SoakReport> {
  const log = options.log ?? (() => {})
  const rand = random(options.seed)
  const faulty = await startFaultyServer(undefined, 30)
  const judge = await startFakeJudge(judgeAnswer)
  const port = await freePort()
  const server: ChildProcess = spawn(process.execPath, [SERVER_JS], {
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '/tmp',
      HOST: '127.0.0.1',
      PORT: String(port),
      LOG_LEVEL: 'info',
      ARBITER_PLUGINS_DIR: PLUGINS,
      ARBITER_RUBRICS_DIR: RUBRICS,
      ARBITER_JUDGE_BASE_URL: judge.url,
      ARBITER_JUDGE_MODEL: 'fake-judge-1',
      ARBITER_JUDGE_CACHE_SIZE: '0',
      ARBITER_PLUGIN_WORKERS: '2',
      ARBITER_PLUGIN_MEMORY_MB: '256',
      ARBITER_PLUGIN_IDLE_S: '1',
      ARBITER_GRACE_S: '30'
    },
    stdio: ['ignore', 'pipe', 'inherit']
  })
  let serverLog = ''
  server.stdout?.on('data', (chunk: Buffer) => { serverLog += chunk.toString() })
  const exited = once(server, 'exit').then(([code]) => code as number | null)
  const url = `http://127.0.0.1:${port}`
  for (let tries = 0; ; tries++) {
    if (server.exitCode !== null) throw new Error('server exited at start')
    const ready = await fetch(`${url}/readyz`).then((r) => r.status === 200, () => false)
    if (ready) break
    if (tries > 300) throw new Error('server not ready')
    await new Promise((resolve) => setTimeout(resolve, 50))
  }

  const all = scenarios(faulty.url)
  const totalWeight = all.reduce((sum, s) => sum + s.weight, 0)
  const pick = (): Scenario => {
    let r = rand() * totalWeight
    for (const scenario of all) { r -= scenario.weight; if (r < 0) return scenario }
    return all[0]
  }

  const start = resources(server.pid as number)
  const report: SoakReport = {
    options,
    durationMs: 0,
    sent: 0,
    answered: 0,
    byStatus: {},
    byScenario: {},
    connectionErrors: {},
    timeouts: 0,
    unexpected: [],
    faultsInjected: { workerKills: 0, networkFaultRequests: 0, failingVerifierRequests: 0 },
    violations: []
  }
  const clientCounts: Record<string, number> = {}
  const cutOff: string[] = []
  const pool = new Pool(url, { connections: options.concurrency, headersTimeout: 60_000, bodyTimeout: 60_000 })
  const began = Date.now()
  const until = began + options.durationS * 1000
  let signalled = false

  const killer = options.killEveryMs > 0
    ? setInterval(() => {
      const workers = descendants(server.pid as number)
      if (workers.length === 0) return
      const victim = workers[Math.floor(rand() * workers.length)]
      try { process.kill(victim, 'SIGKILL'); report.faultsInjected.workerKills++ } catch { /* already gone */ }
    }, options.killEveryMs)
    : undefined
  const shutdown = options.shutdownAfterS === undefined
    ? undefined
    : setTimeout(() => { signalled = true; server.kill('SIGTERM'); log('SIGTERM sent') }, options.shutdownAfterS * 1000)

  let n = 0
  const lane = async (): Promise<void> => {
    while (Date.now() < until) {
      const scenario = pick()
      const id = `soak-${n++}`
      report.sent++
      if (FAILING.test(scenario.name)) report.faultsInjected.networkFaultRequests++
      if (FAILING_VERIFIER.test(scenario.name)) report.faultsInjected.failingVerifierRequests++
      const tally = (report.byScenario[scenario.name] ??= {})
      try {
        const response = await pool.request({ path: scenario.route, method: 'POST', headers: { 'content-type': 'application/json', 'x-request-id': id }, body: JSON.stringify(scenario.body(n)) })
        const body = await response.body.json() as Record<string, unknown>
        report.answered++
        const status = String(response.statusCode)
        report.byStatus[status] = (report.byStatus[status] ?? 0) + 1
        const key = `${scenario.route} ${status}`
        clientCounts[key] = (clientCounts[key] ?? 0) + 1
        const answer = status === '502' ? `502:${String(body.code)}` : status
        tally[answer] = (tally[answer] ?? 0) + 1
        if (status !== '503' && !scenario.expect.includes(answer)) report.unexpected.push(`${scenario.name}: ${answer} ${String(body.message ?? '').slice(0, 160)}`)
        if (status === '200' && scenario.route === '/v1/verify' && !Number.isFinite(body.reward)) report.unexpected.push(`${scenario.name}: 200 without a finite reward`)
      } catch (error) {
        const code = (error as { code?: string }).code ?? (error as Error).name
        if (/TIMEOUT/i.test(code)) report.timeouts++
        report.connectionErrors[code] = (report.connectionErrors[code] ?? 0) + 1
        tally[`error:${code}`] = (tally[`error:${code}`] ?? 0) + 1
        if (code !== 'ECONNREFUSED') cutOff.push(id)
        if (!signalled) report.unexpected.push(`${scenario.name}: connection error ${code} before any shutdown`)
        if (signalled && code === 'ECONNREFUSED') await new Promise((resolve) => setTimeout(resolve, 20))
      }
    }
  }
  await Promise.all(Array.from({ length: options.concurrency }, lane))
  report.durationMs = Date.now() - began
  if (killer !== undefined) clearInterval(killer)
  if (shutdown !== undefined) clearTimeout(shutdown)
  await pool.close()

  if (options.shutdownAfterS === undefined) {
    const metrics = await (await fetch(`${url}/metrics`)).text()
    report.serverCounts = {}
    for (const line of metrics.split('\n')) {
      const match = /^arbiter_http_responses_total\{route="(\/v1\/verify(?:\/batch)?)",status="(\d+)"\} (\d+)/.exec(line)
      if (match !== null) report.serverCounts[`${match[1]} ${match[2]}`] = Number(match[3])
    }
    for (const key of new Set([...Object.keys(clientCounts), ...Object.keys(report.serverCounts)])) {
      if ((clientCounts[key] ?? 0) !== (report.serverCounts[key] ?? 0)) report.violations.push(`server counted ${report.serverCounts[key] ?? 0} × ${key}, the client ${clientCounts[key] ?? 0}`)
    }
    // Idle workers are reaped after ARBITER_PLUGIN_IDLE_S; give them and closed sockets a moment.
    let end = resources(server.pid as number)
    for (let i = 0; i < 40 && (end.workers > start.workers || end.fds > start.fds + 2); i++) {
      await new Promise((resolve) => setTimeout(resolve, 250))
      end = resources(server.pid as number)
    }
    report.resources = { start, end }
    if (end.workers > start.workers) report.violations.push(`${end.workers} worker processes left (started with ${start.workers})`)
    if (end.fds > start.fds + 2) report.violations.push(`${end.fds} file descriptors open (started with ${start.fds})`)
    if (end.rssMiB > start.rssMiB + 160) report.violations.push(`RSS grew from ${start.rssMiB} to ${end.rssMiB} MiB`)
    server.kill('SIGTERM')
  }
  report.exitCode = await exited
  if (report.exitCode !== 0) report.violations.push(`the server exited with ${String(report.exitCode)}`)

  // A request the server accepted has a summary line in its log; none of those may have been cut off.
  const accepted = new Set<string>()
  for (const match of serverLog.matchAll(/"requestId":"(soak-\d+)(?:#\d+)?"[^\n]*"msg":"verification"/g)) accepted.add(match[1])
  report.cutOffAccepted = cutOff.filter((id) => accepted.has(id)).length
  if (report.cutOffAccepted > 0) report.violations.push(`${report.cutOffAccepted} accepted requests got a connection error instead of an answer`)
  if (report.answered + Object.values(report.connectionErrors).reduce((a, b) => a + b, 0) !== report.sent) report.violations.push('a request got no answer and no error')
  if (report.timeouts > 0) report.violations.push(`${report.timeouts} client timeouts`)
  for (const line of report.unexpected.slice(0, 20)) report.violations.push(`unexpected answer: ${line}`)

  await faulty.close()
  await judge.close()
  return report
}
