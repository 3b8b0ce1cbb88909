// The closest thing to building the image on a machine without Docker: lay out a folder with
// exactly what the Dockerfile's runtime stage copies (context COPYs copied, dist/ compiled with
// tsc from the sources the build stage copies, the production dependency tree only), start the
// exec-form CMD with the image's ENV from its WORKDIR, run the HEALTHCHECK command verbatim until
// it passes, and check that the service is ready, reports its version, and exits 0 on SIGTERM.
import t, { type Test } from 'tap'
import { execFile, spawn, type ChildProcess } from 'node:child_process'
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, relative, sep } from 'node:path'
import { copiesOf, envOf, execForm, readDockerfile, ROOT } from './dockerfile.js'
import { freePort } from '../helpers/ports.js'

const { stages, final } = readDockerfile()
const build = stages.find((stage) => stage.instructions.some((i) => i.op === 'RUN' && /npm run build/.test(i.args)))
const clean = (path: string): string => path.replace(/^\.\//, '').replace(/\/$/, '')

function run (command: string, args: string[], options: { cwd?: string, env?: NodeJS.ProcessEnv } = {}): Promise<{ code: number, output: string }> {
  return new Promise((resolve) => {
    execFile(command, args, { ...options, timeout: 90_000, maxBuffer: 16 * 1024 * 1024 }, (error, stdout, stderr) => {
      resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : 1, output: `${stdout}${stderr}` })
    })
  })
}


const pause = async (ms: number): Promise<void> => { await new Promise((resolve) => setTimeout(resolve, ms)) }

/** node_modules/<pkg> folders of the production dependency tree (what npm ci --omit=dev installs). */
async function productionPackages (): Promise<string[]> {
  const listed = await run('npm', ['ls', '--omit=dev', '--parseable', '--all'], { cwd: ROOT, env: process.env })
  const tops = new Set<string>()
  for (const line of listed.output.split('\n')) {
    const parts = relative(ROOT, line.trim()).split(sep)
    if (parts[0] !== 'node_modules' || parts.length < 2) continue
    tops.add(parts[1].startsWith('@') ? join(parts[0], parts[1], parts[2]) : join(parts[0], parts[1]))
  }
  if (tops.size === 0) throw new Error(`npm ls listed no production packages:\n${listed.output.slice(0, 1000)}`)
  return [...tops]
}

/** Builds <scratch>/app the way the Dockerfile builds /app; returns its path. */
async function layOut (t: Test): Promise<string> {
  if (build === undefined) throw new Error('no stage runs npm run build')
  const scratch = mkdtempSync(join(tmpdir(), 'arbiter-image-'))
  t.teardown(() => rmSync(scratch, { recursive: true, force: true }))
  const app = join(scratch, 'app')
  mkdirSync(app)

  // Build stage: tsc over exactly the sources it copies (a type error fails `npm run build` too).
  const sources = copiesOf(build).filter((c) => c.from === undefined).flatMap((c) => c.sources).map(clean)
  const include = sources.filter((source) => !source.endsWith('.json')).map((source) => join(ROOT, source, '**/*.ts'))
  const tsconfig = join(scratch, 'tsconfig.build.json')
  writeFileSync(tsconfig, JSON.stringify({
    extends: join(ROOT, 'tsconfig.json'),
    compilerOptions: { rootDir: ROOT, outDir: join(app, 'dist'), sourceMap: false, typeRoots: [join(ROOT, 'node_modules/@types')] },
    include
  }))
  const compiled = await run(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', tsconfig])
  t.equal(compiled.code, 0, `tsc over ${sources.join(', ')} compiles\n${compiled.output.slice(0, 2000)}`)

  // Runtime stage: its COPYs, in order.
  for (const copy of copiesOf(final)) {
    const dest = join(app, clean(copy.dest))
    if (copy.from === undefined) {
      for (const source of copy.sources) {
        const to = copy.sources.length > 1 || copy.dest === './' ? join(dest, clean(source)) : dest
        mkdirSync(dirname(to), { recursive: true })
        cpSync(join(ROOT, clean(source)), to, { recursive: true, filter: (path) => !path.includes('__pycache__') })
      }
    } else if (/node_modules\/?$/.test(copy.dest)) {
      // Copied rather than linked, so module resolution cannot reach a dev dependency.
      for (const path of await productionPackages()) cpSync(join(ROOT, path), join(app, path), { recursive: true })
    } else {
      t.match(copy.sources[0], /\/dist\/?$/, `line ${copy.line}: only dist/ and node_modules/ come from other stages`)
    }
  }
  t.ok(existsSync(join(app, 'dist', 'src', 'server.js')), 'dist/src/server.js is in place')
  t.notOk(existsSync(join(app, 'node_modules', 'typescript')), 'no dev dependency in node_modules')
  return app
}

interface Started { base: string, env: NodeJS.ProcessEnv, child: ChildProcess, exited: Promise<number | null>, output: () => string, healthy: boolean }

/** Starts CMD (optionally through `script` for a terminal) and polls the HEALTHCHECK command. */
async function start (t: Test, app: string, options: { tty?: boolean } = {}): Promise<Started> {
  const port = await freePort()
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    ...Object.fromEntries(envOf(final)),
    HOST: '127.0.0.1', // the image says 0.0.0.0; a test on a shared machine stays on loopback
    PORT: String(port)
  }
  const cmd = execForm(final.instructions.filter((i) => i.op === 'CMD').at(-1)) ?? []
  t.equal(cmd[0], 'node')
  const argv = [process.execPath, ...cmd.slice(1)]
  const child: ChildProcess = options.tty === true
    ? spawn('script', ['-qfec', argv.join(' '), '/dev/null'], { cwd: app, env, stdio: ['pipe', 'pipe', 'pipe'] })
    : spawn(argv[0], argv.slice(1), { cwd: app, env, stdio: ['ignore', 'pipe', 'pipe'] })
  let output = ''
  child.stdout?.on('data', (chunk: Buffer) => { output += chunk.toString('utf8') })
  child.stderr?.on('data', (chunk: Buffer) => { output += chunk.toString('utf8') })
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)))
  t.teardown(() => { if (child.exitCode === null) child.kill('SIGKILL') })

  const healthcheck = final.instructions.find((i) => i.op === 'HEALTHCHECK')
  const probe = execForm(healthcheck === undefined ? undefined : { ...healthcheck, args: healthcheck.args.replace(/^.*?\bCMD\s+/s, '') }) ?? []
  t.equal(probe[0], 'node', 'the HEALTHCHECK runs node')
  let healthy = false
  for (let attempt = 0; attempt < 100 && !healthy && child.exitCode === null; attempt++) {
    healthy = (await run(process.execPath, probe.slice(1), { cwd: app, env })).code === 0
    if (!healthy) await pause(200)
  }
  return { base: `http://127.0.0.1:${port}`, env, child, exited, output: () => output, healthy }
}

t.test('the runtime stage\'s files boot the service, pass the HEALTHCHECK and drain on SIGTERM', async (t) => {
  const app = await layOut(t)
  const started = await start(t, app)
  t.ok(started.healthy, `the HEALTHCHECK command passes against the started CMD\n${started.output().slice(-2000)}`)
  const ready = await fetch(`${started.base}/readyz`)
  t.equal(ready.status, 200, `/readyz: ${await ready.text()}`)
  const root = await fetch(`${started.base}/`)
  t.equal(root.status, 200)
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }
  t.match(await root.text(), pkg.version, 'package.json shipped: GET / reports the version')
  t.equal((await fetch(`${started.base}/v1/verifiers`)).status, 200)
  // The embedded defaults (examples/) and the plugin worker runtime shipped: a Python plugin runs.
  const verified = await fetch(`${started.base}/v1/verify`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      manifest: { name: 'arithmetic', version: '1.0.0', verifier: { kind: 'plugin', ref: 'verify:score_arithmetic' } },
      task: { prompt: 'What is 2+2?', reference: '4' },
      trajectory: 'The answer is 4'
    })
  })
  const answer = await verified.json() as { reward?: number }
  t.equal(verified.status, 200, `the example Python plugin answers: ${JSON.stringify(answer)}`)
  t.equal(answer.reward, 1)
  started.child.kill('SIGTERM')
  t.equal(await started.exited, 0, 'SIGTERM drains and exits 0')

  // `docker run -it` gives the process a terminal: src/server.ts then asks pino for pino-pretty,
  // a dev dependency the image does not have.
  const hasScript = (await run('script', ['-V'])).code === 0
  t.test('on a terminal (docker run -it)', { skip: hasScript ? false : 'util-linux `script` is not installed' }, async (t) => {
    const onTty = await start(t, app, { tty: true })
    // src/server.ts only asks for pino-pretty when it can be resolved; the image logs JSON.
    t.ok(onTty.healthy, `starts on a terminal too\n${onTty.output().slice(0, 400)}`)
    onTty.child.kill('SIGTERM')
    await onTty.exited
  })
})
