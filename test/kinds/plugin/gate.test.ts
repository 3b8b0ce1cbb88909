// The digest gate, the lock file, plugin selection by name, module paths confined to the
// plugin folder, and what GET /v1/verifiers and /readyz are told.
import t from 'tap'
import { execFile } from 'node:child_process'
import { cp, mkdir, mkdtemp, readFile, rm, stat, symlink, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { digestFolder } from '../../../src/kinds/plugin/digest.js'
import { ConfigError } from '../../../src/errors.js'
import { EXAMPLES, FIXTURES, ROOT, call, failure, makeKind } from './helpers.js'

const run = promisify(execFile)

async function tempDir (t: { teardown: (fn: () => unknown) => void }): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'arbiter-gate-'))
  t.teardown(async () => await rm(dir, { recursive: true, force: true }))
  return dir
}

/** A plugins folder with one Python plugin whose import leaves a marker file behind. */
async function markerPlugins (t: { teardown: (fn: () => unknown) => void }): Promise<{ root: string, marker: string }> {
  const root = await tempDir(t)
  const marker = join(root, 'imported.marker')
  await mkdir(join(root, 'gated'))
  await writeFile(join(root, 'gated', 'manifest.json'), JSON.stringify({ name: 'gated', kind: 'environment', version: '2.0.0', runtime: 'python' }))
  await writeFile(join(root, 'gated', 'verify.py'), `open(${JSON.stringify(marker)}, "w").write("imported")\n\ndef score(task, trajectory):\n    return 1.0\n`)
  return { root, marker }
}

async function exists (path: string): Promise<boolean> {
  return await stat(path).then(() => true, () => false)
}

t.test('digest: sorted paths and bytes, caches excluded, symlinks by their text', async (t) => {
  const dir = await tempDir(t)
  await writeFile(join(dir, 'manifest.json'), '{}')
  await mkdir(join(dir, 'b'))
  await writeFile(join(dir, 'b', 'x.py'), 'x = 1\n')
  const base = await digestFolder(dir)
  t.match(base, /^sha256:[0-9a-f]{64}$/)

  await mkdir(join(dir, '__pycache__'))
  await writeFile(join(dir, '__pycache__', 'x.cpython-311.pyc'), 'junk')
  await writeFile(join(dir, 'b', 'stale.pyc'), 'junk')
  await mkdir(join(dir, 'node_modules', '.cache', 'x'), { recursive: true })
  await writeFile(join(dir, 'node_modules', '.cache', 'x', 'y'), 'junk')
  t.equal(await digestFolder(dir), base, 'caches do not change the digest')

  await writeFile(join(dir, 'node_modules', 'dep.js'), 'export default 1\n')
  const withDep = await digestFolder(dir)
  t.not(withDep, base, 'node_modules outside .cache counts')
  await writeFile(join(dir, 'b', 'x.py'), 'x = 2\n')
  t.not(await digestFolder(dir), withDep, 'one changed byte changes the digest')
  await writeFile(join(dir, 'b', 'x.py'), 'x = 1\n')
  t.equal(await digestFolder(dir), withDep, 'and back')
  await symlink('/etc/hostname', join(dir, 'link'))
  t.not(await digestFolder(dir), withDep, 'a symlink counts by its link text')

  // The Python implementation (runnable without a build) agrees on every folder here.
  for (const folder of [dir, `${EXAMPLES}/arithmetic`, `${EXAMPLES}/exact-match-js`, `${FIXTURES}/py-pkg`]) {
    const { stdout } = await run('python3', [`${ROOT}src/kinds/plugin/runtime/digest.py`, folder])
    t.equal(stdout.trim(), await digestFolder(folder), `digest.py agrees on ${folder}`)
  }
})

t.test('the request selects the plugin by manifest.name; version and digest must match', async (t) => {
  const kind = await makeKind(t, { pluginsDir: EXAMPLES })
  const digest = await digestFolder(`${EXAMPLES}/arithmetic`)
  const task = { reference: '4' }
  t.equal((await call(kind, 'arithmetic', 'verify:score_arithmetic', task, '4', { version: '1.0.0', digest })).reward, 1)

  const wrongDigest = await failure(call(kind, 'arithmetic', 'verify:score_arithmetic', task, '4', { digest: `sha256:${'0'.repeat(64)}` }))
  t.equal(wrongDigest.code, 'ARB_PLUGIN_DIGEST_MISMATCH')
  t.match(wrongDigest.message, digest)
  const wrongVersion = await failure(call(kind, 'arithmetic', 'verify:score_arithmetic', task, '4', { version: '2.0.0' }))
  t.equal(wrongVersion.code, 'ARB_PLUGIN_VERSION_MISMATCH')
  const unknown = await failure(call(kind, 'geometry', 'verify:score'))
  t.equal(unknown.code, 'ARB_PLUGIN_NOT_FOUND')
  t.match(unknown.message, /arithmetic, exact-match-js/)
  t.equal((await failure(call(kind, undefined, 'verify:score'))).code, 'ARB_PLUGIN_NOT_FOUND')
})

t.test('two plugins with the same module name never share a module', async (t) => {
  const kind = await makeKind(t, { workers: 1 })
  const results = await Promise.all([
    call(kind, 'same-a', 'verify:score'), call(kind, 'same-b', 'verify:score'),
    call(kind, 'same-a', 'verify:score'), call(kind, 'same-b', 'verify:score')
  ])
  t.same(results.map((r) => [r.reward, (r as { message: string }).message]), [[0.25, 'a'], [0.75, 'b'], [0.25, 'a'], [0.75, 'b']])
})

t.test('refs cannot leave the plugin folder', async (t) => {
  const root = await tempDir(t)
  await cp(`${FIXTURES}/same-a`, join(root, 'same-a'), { recursive: true })
  await writeFile(join(root, 'outside.py'), 'def score(task, trajectory):\n    return 1.0\n')
  await symlink(join(root, 'outside.py'), join(root, 'same-a', 'escape.py'))
  const kind = await makeKind(t, { pluginsDir: root })
  for (const ref of ['../outside:score', '/etc/passwd:score', '..:score', 'a/b:score', 'verify:../x', 'verify:a.b', '.verify:score', 'verify.:score', '']) {
    const error = await failure(call(kind, 'same-a', ref))
    t.equal(error.code, 'ARB_PLUGIN_MODULE_NOT_FOUND', `ref ${JSON.stringify(ref)} is refused`)
  }
  const escaped = await failure(call(kind, 'same-a', 'escape:score'))
  t.equal(escaped.code, 'ARB_PLUGIN_MODULE_NOT_FOUND', 'a symlink out of the folder is refused')
  t.match(escaped.message, /outside the plugin folder/)
  t.equal((await call(kind, 'same-a', 'verify:score')).reward, 0.25)
})

t.test('lock file: pinned plugins run; unpinned or changed ones are refused and never run', async (t) => {
  const { root, marker } = await markerPlugins(t)
  const digest = await digestFolder(join(root, 'gated'))
  const lockDir = await tempDir(t)

  const unpinned = join(lockDir, 'unpinned.json')
  await writeFile(unpinned, JSON.stringify({ 'other@1.0.0': digest }))
  const refusing = await makeKind(t, { pluginsDir: root, lockFile: unpinned })
  const notPinned = await failure(call(refusing, 'gated', 'verify:score'))
  t.equal(notPinned.code, 'ARB_PLUGIN_NOT_VETTED')
  t.match(notPinned.message, /gated@2.0.0 is not pinned/)
  t.match(refusing.describe(), { plugins: [{ name: 'gated', status: 'refused', reason: /not pinned/, digest }] })

  const wrong = join(lockDir, 'wrong.json')
  await writeFile(wrong, JSON.stringify({ 'gated@2.0.0': `sha256:${'1'.repeat(64)}` }))
  const mismatched = await makeKind(t, { pluginsDir: root, lockFile: wrong })
  const changed = await failure(call(mismatched, 'gated', 'verify:score'))
  t.equal(changed.code, 'ARB_PLUGIN_NOT_VETTED')
  t.match(changed.message, /do not match the lock file/)
  t.notOk(await exists(marker), 'nothing of a refused plugin ran')

  const right = join(lockDir, 'right.json')
  await writeFile(right, JSON.stringify({ 'gated@2.0.0': digest }))
  const vetted = await makeKind(t, { pluginsDir: root, lockFile: right })
  t.match(vetted.describe(), { plugins: [{ name: 'gated', status: 'vetted', digest }], lock: right })
  t.equal((await call(vetted, 'gated', 'verify:score')).reward, 1)
  t.ok(await exists(marker), 'the pinned plugin ran')
})

t.test('a plugin whose files change after vetting is refused before its worker starts', async (t) => {
  const { root, marker } = await markerPlugins(t)
  const kind = await makeKind(t, { pluginsDir: root })
  await writeFile(join(root, 'gated', 'verify.py'), 'def score(task, trajectory):\n    return 0.5\n')
  const error = await failure(call(kind, 'gated', 'verify:score'))
  t.equal(error.code, 'ARB_PLUGIN_NOT_VETTED')
  t.match(error.message, /changed since they were vetted/)
  t.notOk(await exists(marker))
  t.match(kind.describe(), { plugins: [{ name: 'gated', status: 'refused' }] })
  t.equal((await failure(call(kind, 'gated', 'verify:score'))).code, 'ARB_PLUGIN_NOT_VETTED', 'and stays refused')
})

t.test('files that change after a reload that kept the plugin are refused all the same', async (t) => {
  const { root } = await markerPlugins(t)
  // One call per worker: every call starts a worker, so every call passes the digest check.
  const kind = await makeKind(t, { pluginsDir: root, workers: 1, maxCalls: 1 })
  t.equal((await call(kind, 'gated', 'verify:score')).reward, 1)
  await kind.reload?.() // same files: the plugin and its pool carry on
  await writeFile(join(root, 'gated', 'verify.py'), 'def score(task, trajectory):\n    return 0.5\n')
  const error = await failure(call(kind, 'gated', 'verify:score'))
  t.equal(error.code, 'ARB_PLUGIN_NOT_VETTED')
  t.match(kind.describe(), { plugins: [{ name: 'gated', status: 'refused', reason: /changed since they were vetted/ }] }, 'the current catalog says so')
  t.equal((await failure(call(kind, 'gated', 'verify:score'))).code, 'ARB_PLUGIN_NOT_VETTED', 'and refuses before any worker')
})

t.test('a bad lock file or plugins folder stops the start', async (t) => {
  const dir = await tempDir(t)
  await t.rejects(makeKind(t, { pluginsDir: EXAMPLES, lockFile: join(dir, 'missing.json') }), ConfigError)
  await writeFile(join(dir, 'bad.json'), JSON.stringify({ arithmetic: 'sha256:abc' }))
  await t.rejects(makeKind(t, { pluginsDir: EXAMPLES, lockFile: join(dir, 'bad.json') }), { name: 'ConfigError', message: /^ARBITER_PLUGINS_LOCK: / })
  await t.rejects(makeKind(t, { pluginsDir: join(dir, 'nope') }), { name: 'ConfigError', message: /^ARBITER_PLUGINS_DIR: / })
})

t.test('describe() reports vetted and refused folders with reasons; duplicate names run neither', async (t) => {
  const root = await tempDir(t)
  await cp(FIXTURES, root, { recursive: true })
  await cp(join(root, 'same-a'), join(root, 'same-a-copy'), { recursive: true })
  const kind = await makeKind(t, { pluginsDir: root })
  const described = kind.describe() as { plugins: Array<Record<string, unknown>>, python: Record<string, unknown> }
  const byFolder = Object.fromEntries(described.plugins.map((p) => [p.folder, p]))
  t.match(byFolder['py-edge'], { name: 'py-edge', version: '0.1.0', runtime: 'python', status: 'vetted', digest: /^sha256:/ })
  t.match(byFolder['js-edge'], { runtime: 'node', status: 'vetted' })
  t.match(byFolder['py-pkg'], { runtime: 'python', status: 'vetted' }, 'runtime inferred from the manifest\'s ref')
  t.match(byFolder['not-env'], { status: 'refused', reason: /not "environment"/ })
  t.match(byFolder['no-manifest'], { status: 'refused', reason: 'no manifest.json' })
  t.match(byFolder['same-a'], { status: 'refused', reason: /claimed by several folders/ })
  t.match(byFolder['same-a-copy'], { status: 'refused' })
  t.match(described.python, { available: true, executable: /python/ })
  t.equal((await failure(call(kind, 'same-a', 'verify:score'))).code, 'ARB_PLUGIN_NOT_VETTED')
  t.equal(kind.notReadyReason?.(), undefined)
  t.ok(kind.log.lines.some((line) => line.level === 'warn' && line.msg === 'environment plugin refused' && (line.obj as { folder?: string }).folder === 'not-env'), 'refusals are logged with the reason')
})

t.test('python unavailable: only python plugins fail, readiness says why', async (t) => {
  const kind = await makeKind(t, { pluginsDir: EXAMPLES, python: '/nonexistent/python3' })
  t.match(kind.notReadyReason?.(), /python runtime unavailable .* arithmetic/)
  const error = await failure(call(kind, 'arithmetic', 'verify:score_arithmetic', { reference: '4' }, '4'))
  t.equal(error.code, 'ARB_PLUGIN_RUNTIME_UNAVAILABLE')
  t.equal((await call(kind, 'exact-match-js', 'verify:exactMatch', { reference: 'a' }, 'a')).reward, 1, 'node plugins still run')
  t.match(kind.describe(), { python: { available: false, reason: /nonexistent/ } })

  const nodeOnly = await tempDir(t)
  await cp(`${EXAMPLES}/exact-match-js`, join(nodeOnly, 'exact-match-js'), { recursive: true })
  const ready = await makeKind(t, { pluginsDir: nodeOnly, python: '/nonexistent/python3' })
  t.equal(ready.notReadyReason?.(), undefined, 'a Node-only deployment needs no Python')
})

t.test('workers get a scrubbed environment and run in the plugin folder; output is captured', async (t) => {
  process.env.ARBITER_JUDGE_API_KEY = 'sk-secret-for-test'
  process.env.SOME_OTHER_SECRET = 'hunter2'
  t.teardown(() => { delete process.env.ARBITER_JUDGE_API_KEY; delete process.env.SOME_OTHER_SECRET })
  const kind = await makeKind(t)
  const seen = JSON.parse((await call(kind, 'py-edge', 'verify:env') as { message: string }).message) as { env: Record<string, string>, cwd: string }
  t.notOk(Object.keys(seen.env).some((name) => name.startsWith('ARBITER_')), 'no ARBITER_* variable')
  t.notOk(JSON.stringify(seen.env).includes('sk-secret-for-test'), 'no judge key anywhere')
  t.notOk('SOME_OTHER_SECRET' in seen.env)
  t.ok('PATH' in seen.env)
  t.equal(seen.cwd, `${FIXTURES}/py-edge`)

  // print() and console.log noise cannot corrupt the protocol; it is logged at debug, capped.
  t.equal((await call(kind, 'py-edge', 'verify:noisy')).reward, 1)
  t.equal((await call(kind, 'js-edge', 'verify:noisy')).reward, 1)
  t.equal((await call(kind, 'py-edge', 'verify:one')).reward, 1)
  const output = async (pattern: RegExp): Promise<Record<string, unknown> | undefined> => {
    const line = kind.log.lines.find((l) => l.level === 'debug' && l.msg === 'plugin output' && pattern.test(String((l.obj as { output?: string }).output)))
    return line?.obj as Record<string, unknown> | undefined
  }
  const { waitFor } = await import('./helpers.js')
  const py = await waitFor(async () => await output(/hello from print\(\)/))
  t.ok(py, 'python stdout logged at debug')
  t.ok((py?.output as string).length <= 64 * 1024, 'capped')
  t.ok(await waitFor(async () => await output(/hello from console.log/)), 'node stdout logged at debug')
  t.ok(await waitFor(async () => await output(/some stderr/)), 'stderr logged at debug')
  t.ok(await readFile(`${FIXTURES}/py-edge/verify.py`, 'utf8'))
})

t.test('reload() re-vets the folder: changed plugins get fresh workers, a bad lock keeps the old catalog', async (t) => {
  const root = await tempDir(t)
  await cp(`${FIXTURES}/same-a`, join(root, 'same-a'), { recursive: true })
  const lockDir = await tempDir(t)
  const lock = join(lockDir, 'lock.json')
  await writeFile(lock, JSON.stringify({ 'same-a@1.0.0': await digestFolder(join(root, 'same-a')) }))
  const kind = await makeKind(t, { pluginsDir: root, lockFile: lock, workers: 1 })
  t.match(await call(kind, 'same-a', 'verify:score'), { reward: 0.25, message: 'a' })

  await writeFile(join(root, 'same-a', 'verify.py'), 'def score(task, trajectory):\n    return {"reward": 0.5, "message": "edited"}\n')
  const edited = await digestFolder(join(root, 'same-a'))
  await writeFile(lock, JSON.stringify({ 'same-a@1.0.0': edited }))
  await kind.reload?.()
  t.match(await call(kind, 'same-a', 'verify:score'), { reward: 0.5, message: 'edited', verifier: { digest: edited } }, 'the re-vetted code runs, not a cached module, and the answer names its digest')

  await writeFile(lock, 'not json')
  await t.rejects(kind.reload?.() as Promise<void>, { name: 'ConfigError' })
  t.match(await call(kind, 'same-a', 'verify:score'), { reward: 0.5 }, 'a failed reload changes nothing')
})

t.test('the digest command prints a digest, or a lock file for several folders', async (t) => {
  const { main } = await import('../../../src/kinds/plugin/digest-cli.js')
  let out = ''
  t.equal(await main([`${EXAMPLES}/arithmetic`], (text) => { out += text }), 0)
  t.equal(out, `${await digestFolder(`${EXAMPLES}/arithmetic`)}\n`)
  out = ''
  t.equal(await main(['--lock', `${EXAMPLES}/arithmetic`, `${EXAMPLES}/exact-match-js`, `${FIXTURES}/no-manifest`], (text) => { out += text }), 0)
  t.same(JSON.parse(out), {
    'arithmetic@1.0.0': await digestFolder(`${EXAMPLES}/arithmetic`),
    'exact-match-js@1.0.0': await digestFolder(`${EXAMPLES}/exact-match-js`)
  })
  t.equal(await main([], () => {}), 2, 'usage')
})

t.test('worker command lines: memory caps, runtimes from the source tree, setpriv when present', async (t) => {
  const { spawnSpec, RUNTIME_DIR } = await import('../../../src/kinds/plugin/runtimes.js')
  t.equal(RUNTIME_DIR, `${ROOT}src/kinds/plugin/runtime/`)
  const env = { PATH: '/usr/bin' }
  t.same(spawnSpec('python', { python: '/opt/venv/bin/python', pluginPath: '/p', memoryMb: 256, env, setpriv: null }),
    { command: '/opt/venv/bin/python', args: ['-B', `${RUNTIME_DIR}worker.py`, '/p', '256'], cwd: '/p', env })
  t.same(spawnSpec('node', { pluginPath: '/p', memoryMb: 128, env, setpriv: null }),
    { command: process.execPath, args: ['--max-old-space-size=128', `${RUNTIME_DIR}worker.mjs`, '/p'], cwd: '/p', env })
  t.same(spawnSpec('node', { pluginPath: '/p', memoryMb: 128, env, setpriv: '/usr/bin/setpriv' }).args.slice(0, 4),
    ['--pdeathsig', 'KILL', '--', process.execPath])
})

/** A process's scheduling policy from /proc (0: SCHED_OTHER, 3: SCHED_BATCH), per thread. */
async function policies (pid: number): Promise<number[]> {
  const { readdir } = await import('node:fs/promises')
  const threads = await readdir(`/proc/${pid}/task`)
  return await Promise.all(threads.map(async (tid) => {
    const stat = await readFile(`/proc/${pid}/task/${tid}/stat`, 'utf8')
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[38])
  }))
}

t.test('workers run under SCHED_BATCH, every thread, so they never preempt the server on wakeup', async (t) => {
  const { batchScheduling, CHRT } = await import('../../../src/kinds/plugin/runtimes.js')
  t.ok(CHRT, 'chrt is found (util-linux)')
  const { spawn } = await import('node:child_process')
  const child = spawn('sleep', ['30'], { stdio: 'ignore' })
  t.teardown(() => child.kill('SIGKILL'))
  const pid = child.pid as number
  t.equal(await batchScheduling(pid, null), 'refused', 'without chrt the process is left as it is')
  t.same(await policies(pid), [0])
  t.equal(await batchScheduling(pid), 'set')
  t.same(await policies(pid), [3])
  t.equal(await batchScheduling(2 ** 22 + 12345), 'gone', 'a process that is gone: reported, not thrown')

  // Both runtimes' workers, as the plugin kind starts them.
  const kind = await makeKind(t, { workers: 1 })
  const py = await call(kind, 'py-edge', 'verify:pid')
  const js = await call(kind, 'js-edge', 'verify:pid')
  for (const [runtime, outcome] of [['python', py], ['node', js]] as const) {
    const workerPid = Number((outcome as { message: string }).message)
    let seen: number[] = []
    for (let tries = 0; tries < 100; tries++) {
      seen = await policies(workerPid)
      if (seen.every((policy) => policy === 3)) break
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    t.ok(seen.length > 0 && seen.every((policy) => policy === 3), `the ${runtime} worker's threads are SCHED_BATCH (${seen.join(',')})`)
  }
})
