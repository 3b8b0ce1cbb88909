// The README is part of the product: its first screen, its tables and its curl examples are
// checked here against the code and against the running server.
import t from 'tap'
import { execFile, spawn } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { SETTINGS } from '../src/config.js'
import { catalogue } from '../src/errors.js'
import { startServer } from './helpers/server-process.js'
import { freePort } from './helpers/ports.js'

const ROOT = fileURLToPath(new URL('..', import.meta.url))
const README = readFileSync(`${ROOT}README.md`, 'utf8')
const run = promisify(execFile)


t.test('the first screen gives the two commands, and CI runs the test one', async (t) => {
  const firstScreen = README.split('\n').slice(0, 25).join('\n')
  t.match(firstScreen, /npm ci && npm start/)
  t.match(firstScreen, /npm ci && npm test/)
  t.match(readFileSync(`${ROOT}.ci/run`, 'utf8'), /^npm test$/m)
})

t.test('every error code is in the README with its status and retryability', async (t) => {
  for (const [code, entry] of Object.entries(catalogue)) {
    t.match(README, new RegExp(`\\| \`${code}\` \\| ${entry.status} \\| ${entry.retryable ? 'yes' : 'no'} \\|`), code)
  }
})

t.test('every setting is in the configuration table', async (t) => {
  for (const setting of Object.values(SETTINGS)) t.match(README, new RegExp(`\\| \`${setting.env}\` \\|`), setting.env)
})

t.test('the curl examples work as written against the embedded defaults', async (t) => {
  const block = /## Try it with curl[\s\S]*?```sh\n([\s\S]*?)```/.exec(README)?.[1] ?? ''
  const commands: string[] = []
  for (const line of block.split('\n')) {
    if (/^(curl|node) /.test(line)) commands.push(line)
    else if (commands.length > 0 && /^\s+\S/.test(line) && !line.trimStart().startsWith('#')) commands[commands.length - 1] += '\n' + line
  }
  t.ok(commands.length >= 8, `found ${commands.length} commands`)

  const scorerPort = await freePort()
  const scorer = spawn(process.execPath, [`${ROOT}examples/endpoint-scorer.mjs`], { env: { ...process.env, PORT: String(scorerPort) }, stdio: 'ignore' })
  t.teardown(() => { scorer.kill() })
  const server = await startServer(t)
  const port = new URL(server.url).port
  for (let i = 0; i < 100 && !(await fetch(`http://127.0.0.1:${scorerPort}/`).then(() => true, () => false)); i++) await new Promise((resolve) => setTimeout(resolve, 50))

  const outputs: string[] = []
  for (const command of commands) {
    if (command.startsWith('node examples/endpoint-scorer.mjs')) continue
    const rewritten = command.replaceAll('localhost:8080', `127.0.0.1:${port}`).replaceAll('127.0.0.1:9100', `127.0.0.1:${scorerPort}`)
    const { stdout } = await run('bash', ['-c', rewritten], { cwd: ROOT })
    outputs.push(stdout)
    t.ok(stdout.length > 0, `${command.split('\n')[0]} printed something`)
    if (!command.includes('/metrics')) t.doesNotThrow(() => JSON.parse(stdout), `${command.split('\n')[0]} printed JSON`)
  }
  const parsed = outputs.map((text) => { try { return JSON.parse(text) as Record<string, any> } catch { return {} } })
  const find = (predicate: (body: Record<string, any>) => boolean): Record<string, any> | undefined => parsed.find(predicate)
  t.ok(find((b) => b.kinds?.plugin?.available === true), '/v1/verifiers lists the plugin kind')
  t.ok(find((b) => b.reward === 1 && b.verifier?.kind === 'plugin'), 'the Python plugin scores 1')
  t.ok(find((b) => b.code === 'ARB_PLUGIN_RAISED' && /no reference/.test(b.message)), 'the raising verifier is a 502 with its message')
  t.ok(find((b) => b.reward === 1 && b.verifier?.ref === 'verify:exactMatch'), 'the JavaScript plugin scores 1')
  t.ok(find((b) => b.code === 'ARB_JUDGE_NOT_CONFIGURED' && b.verifier?.ref === 'alice/arithmetic-correctness'), 'the rubric without a judge is a 502 naming it')
  t.ok(find((b) => b.reward === 1 && b.verifier?.kind === 'endpoint'), 'the example scorer scores 1 through Arbiter')
  t.ok(find((b) => b.code === 'ARB_ENDPOINT_CONNECTION_REFUSED' && b.requestId === 'demo-1'), 'the down endpoint is a 502 naming it')
  t.ok(find((b) => b.ok === 2 && b.failed === 1 && b.results?.length === 3), 'the batch answers each item')
  t.ok(outputs.some((text) => text.includes('arbiter_verifications_total')), '/metrics answers')
})
