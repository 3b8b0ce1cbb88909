// Shared pieces of every benchmark: start servers as child processes on 127.0.0.1, drive them
// from a separate load process, print a table with ratios against a baseline measured in the
// same run. The machine is shared and noisy, so only ratios from one run mean anything.
import { spawn, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import type { LoadResult, LoadSpec } from './load.js'
import { freePort } from '../test/helpers/ports.js'

const DIST = fileURLToPath(new URL('..', import.meta.url))
export const SERVER_JS = `${DIST}src/server.js`
export const BASELINE_JS = `${DIST}bench/servers/baseline.js`
export const UPSTREAM_JS = `${DIST}bench/servers/upstream.js`
export const PROXY_JS = `${DIST}bench/servers/proxy.js`
export const TRIVIAL_JS = `${DIST}bench/servers/trivial.js`
const LOAD_JS = `${DIST}bench/load.js`
/** Seconds of each measured run (BENCH_SECONDS, 8 by default). */
export const BENCH_SECONDS = Number(process.env.BENCH_SECONDS ?? 8)
/** Interleaved rounds of each measurement (BENCH_ROUNDS, 3 by default); see interleave(). */
export const BENCH_ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3)

export interface Running {
  url: string
  child: ChildProcess
  stop: () => Promise<void>
}


const running = new Set<ChildProcess>()
process.on('exit', () => { for (const child of running) child.kill('SIGKILL') })

/** Starts a node script listening on a free loopback port; resolves once /healthz or TCP answers. */
export async function start (script: string, env: Record<string, string> = {}): Promise<Running> {
  const port = await freePort()
  const child = spawn(process.execPath, [script], {
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', HOST: '127.0.0.1', PORT: String(port), ...env },
    stdio: ['ignore', 'ignore', 'inherit']
  })
  running.add(child)
  const url = `http://127.0.0.1:${port}`
  for (let tries = 0; ; tries++) {
    if (child.exitCode !== null) throw new Error(`${script} exited with ${child.exitCode}`)
    const up = await fetch(`${url}/healthz`).then(() => true, () => false)
    if (up) break
    if (tries > 200) throw new Error(`${script} did not start`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  return {
    url,
    child,
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return
      child.kill('SIGTERM')
      const timer = setTimeout(() => child.kill('SIGKILL'), 5000)
      await once(child, 'exit')
      clearTimeout(timer)
      running.delete(child)
    }
  }
}

/** CPU seconds (user + system) a process has used so far, from /proc. */
function cpuSeconds (pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  return (Number(fields[11]) + Number(fields[12])) / 100 // utime + stime, in clock ticks of 10 ms
}

/** Runs a load and also reports the server's CPU time per request (robust to a noisy machine). */
export async function measure (server: Running, spec: Partial<LoadSpec> & Pick<LoadSpec, 'url' | 'body'>): Promise<LoadResult & { cpuUsPerRequest: number }> {
  const before = cpuSeconds(server.child.pid as number)
  const result = await load(spec)
  const used = cpuSeconds(server.child.pid as number) - before
  return { ...result, cpuUsPerRequest: (used * 1e6) / Math.max(1, result.total) }
}

/** Runs one load in a separate process and returns its figures. */
export async function load (spec: Partial<LoadSpec> & Pick<LoadSpec, 'url' | 'body'>): Promise<LoadResult> {
  const full: LoadSpec = { connections: 10, durationS: BENCH_SECONDS, latencyS: 0, ...spec }
  const child = spawn(process.execPath, [LOAD_JS, JSON.stringify(full)], { stdio: ['ignore', 'pipe', 'inherit'] })
  let out = ''
  child.stdout.on('data', (chunk: Buffer) => { out += chunk.toString() })
  await once(child, 'exit')
  return JSON.parse(out) as LoadResult
}

export interface Row { name: string, result: LoadResult & { cpuUsPerRequest?: number } }

export interface Target {
  name: string
  url: string
  body: string
  /** The server process behind url, for its CPU time per request. */
  server?: Running
}

/**
 * Measures the targets in BENCH_ROUNDS interleaved rounds after a warm-up, and
 * keeps each one's median round: a burst of someone else's load on this shared machine then
 * lands on one round of every target rather than on the whole run of one. The first round also
 * samples precise latency. Every round's req/s is printed, so the spread is visible.
 */
export async function interleave (targets: Target[], connections: number): Promise<Row[]> {
  for (const target of targets) await load({ url: target.url, body: target.body, connections, durationS: 2 })
  const samples = targets.map((): Row['result'][] => [])
  for (let round = 0; round < BENCH_ROUNDS; round++) {
    for (const [index, target] of targets.entries()) {
      const spec = { url: target.url, body: target.body, connections, latencyS: round === 0 ? 2 : 0 }
      samples[index].push(target.server === undefined ? await load(spec) : await measure(target.server, spec))
    }
  }
  for (const [index, target] of targets.entries()) console.log(`  ${target.name}: ${samples[index].map((r) => r.rps.toFixed(0)).join(', ')} req/s`)
  return targets.map((target, index) => ({ name: target.name, result: median(samples[index]) }))
}

function median (results: Array<Row['result']>): Row['result'] {
  const middle = [...results].sort((a, b) => a.rps - b.rps)[Math.floor(results.length / 2)]
  return { ...middle, p50Ms: results[0].p50Ms, p99Ms: results[0].p99Ms, errors: results.reduce((n, r) => n + r.errors, 0), non2xx: results.reduce((n, r) => n + r.non2xx, 0) }
}

/** Prints a table of rows with each row's throughput as a ratio of the named reference row; a run with errors or non-2xx answers is not valid (exit code 1). */
export function report (title: string, rows: Row[], reference: string): void {
  const base = rows.find((row) => row.name === reference)?.result.rps ?? Number.NaN
  console.log(`\n${title}`)
  console.log(`${'target'.padEnd(44)} ${'req/s'.padStart(9)} ${'p50 ms'.padStart(8)} ${'p99 ms'.padStart(8)} ${'errors'.padStart(7)} ${'cpu µs/req'.padStart(11)} ${'ratio'.padStart(7)}`)
  for (const { name, result } of rows) {
    const problems = result.errors + result.non2xx
    const cpu = result.cpuUsPerRequest === undefined ? '' : result.cpuUsPerRequest.toFixed(1)
    console.log(`${name.padEnd(44)} ${result.rps.toFixed(0).padStart(9)} ${result.p50Ms.toFixed(3).padStart(8)} ${result.p99Ms.toFixed(3).padStart(8)} ${String(problems).padStart(7)} ${cpu.padStart(11)} ${(result.rps / base).toFixed(3).padStart(7)}`)
  }
  console.log('(cpu µs/req: user+system CPU of the server process under test per request; steadier than req/s on a shared machine)')
  if (rows.some((row) => row.result.errors + row.result.non2xx > 0)) {
    console.log('errors or non-2xx answers during the run: the figures are not valid')
    process.exitCode = 1
  }
}

/** Prints a goal line: PASS/MISS with the measured and required ratio. */
export function goal (name: string, measured: number, required: number, higherIsBetter = true): boolean {
  const met = higherIsBetter ? measured >= required : measured <= required
  console.log(`goal ${met ? 'MET ' : 'MISS'} ${name}: ${measured.toFixed(3)} (${higherIsBetter ? '>=' : '<='} ${required})`)
  return met
}

export function verifyPayload (kind: string, ref: string, extra: { name?: string, task?: unknown, trajectory?: unknown } = {}): string {
  return JSON.stringify({
    manifest: { name: extra.name ?? 'bench', version: '1.0.0', verifier: { kind, ref } },
    task: extra.task ?? { prompt: 'What is 2+2?', reference: '4' },
    trajectory: extra.trajectory ?? 'The answer is 4'
  })
}

/** For bench/servers/trivial.ts, whose endpoint kind answers at once without any I/O. */
export const AT_ONCE_BODY = verifyPayload('endpoint', 'http://127.0.0.1:9/at-once')
