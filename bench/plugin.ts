// Issue 3's benchmark: the plugin kind through POST /v1/verify at 50 connections, a trivial
// Python plugin (examples/plugins/arithmetic, the seed's verify.py) and a trivial JavaScript
// plugin (examples/plugins/exact-match-js), against the bare-Fastify baseline measured in the
// same run, and against spawning a fresh python3 per call.
// Goals: each runtime >= 0.6 of the baseline's req/s; >= 100x spawn-per-call.
//
//   npm run build && node dist/bench/plugin.js        (BENCH_SECONDS=8 by default)
//
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { availableParallelism } from 'node:os'
import { fileURLToPath } from 'node:url'
import { AT_ONCE_BODY, BASELINE_JS, BENCH_ROUNDS, BENCH_SECONDS, SERVER_JS, TRIVIAL_JS, goal, interleave, report, start, verifyPayload } from './harness.js'
import { resolvePython } from '../src/kinds/plugin/runtimes.js'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))
const EXAMPLES = `${ROOT}examples/plugins`

await main()

/** Fresh interpreter per call: start python, import verify.py, score once, exit. */
async function spawnPerCall (python: string, seconds: number, concurrency: number): Promise<number> {
  const script = 'import json,sys; sys.path.insert(0, sys.argv[1]); from verify import score_arithmetic; ' +
    'print(json.dumps(score_arithmetic(json.loads(sys.argv[2]), sys.argv[3])))'
  const args = ['-c', script, `${EXAMPLES}/arithmetic`, JSON.stringify({ reference: '4' }), 'The answer is 4']
  const until = Date.now() + seconds * 1000
  let done = 0
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (Date.now() < until) {
      const child = spawn(python, args, { stdio: ['ignore', 'pipe', 'inherit'] })
      let out = ''
      child.stdout.on('data', (chunk: Buffer) => { out += chunk.toString() })
      const [code] = await once(child, 'exit') as [number | null]
      if (code !== 0 || out.trim() !== '1.0') throw new Error(`spawned python answered ${JSON.stringify(out)} (exit ${code})`)
      done++
    }
  }))
  return done / seconds
}

async function main (): Promise<void> {
  const connections = 50
  // ARBITER_PLUGIN_WORKERS, when set, is passed on to the server (default: the number of cores).
  const serverEnv: Record<string, string> = { LOG_LEVEL: 'info' }
  if (process.env.ARBITER_PLUGIN_WORKERS !== undefined) serverEnv.ARBITER_PLUGIN_WORKERS = process.env.ARBITER_PLUGIN_WORKERS
  const baseline = await start(BASELINE_JS)
  const arbiter = await start(SERVER_JS, serverEnv)
  console.log(`${availableParallelism()} cores; plugin workers per plugin: ${serverEnv.ARBITER_PLUGIN_WORKERS ?? 'default (cores)'}`)

  const python = verifyPayload('plugin', 'verify:score_arithmetic', { name: 'arithmetic' })
  const js = verifyPayload('plugin', 'verify:exactMatch', { name: 'exact-match-js' })
  // The same HTTP path with a kind that answers at once, to tell the HTTP layer's share of the
  // cost from the worker round trip's.
  const noop = await start(TRIVIAL_JS)
  const targets = [
    { name: 'baseline: bare Fastify POST (same schema)', url: `${baseline.url}/v1/verify`, body: python, server: baseline },
    { name: 'arbiter /v1/verify plugin, python', url: `${arbiter.url}/v1/verify`, body: python, server: arbiter },
    { name: 'arbiter /v1/verify plugin, node', url: `${arbiter.url}/v1/verify`, body: js, server: arbiter },
    { name: 'arbiter /v1/verify, a kind answering at once', url: `${noop.url}/v1/verify`, body: AT_ONCE_BODY, server: noop }
  ]
  // The warm-up also starts the workers and imports the plugins.
  const rows = await interleave(targets, connections)
  await arbiter.stop()
  await noop.stop()
  await baseline.stop()
  report(`plugin kind, ${connections} connections, median of ${BENCH_ROUNDS} interleaved rounds of ${BENCH_SECONDS} s`, rows, 'baseline: bare Fastify POST (same schema)')

  const realPython = (await resolvePython('python3')).executable
  const cores = availableParallelism()
  const shimRate = await spawnPerCall('python3', Math.min(BENCH_SECONDS, 5), cores)
  const realRate = await spawnPerCall(realPython, Math.min(BENCH_SECONDS, 5), cores)
  const [base, py, node] = rows.map((row) => row.result)
  console.log(`\nspawn a fresh python per call (${cores} at a time): python3 on PATH ${shimRate.toFixed(1)}/s, resolved ${realPython} ${realRate.toFixed(1)}/s`)
  console.log(`python plugin / spawn-per-call (resolved): ${(py.rps / realRate).toFixed(0)}x; (PATH python3): ${(py.rps / shimRate).toFixed(0)}x`)
  goal('python plugin req/s vs baseline', py.rps / base.rps, 0.6)
  goal('node plugin req/s vs baseline', node.rps / base.rps, 0.6)
  goal('python plugin vs spawn-per-call (resolved interpreter)', py.rps / realRate, 100)
}
