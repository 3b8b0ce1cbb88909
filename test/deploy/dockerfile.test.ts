// The Dockerfile cannot be built on this machine, so its invariants are checked here against the
// repository itself: stages, what reaches the runtime image, the user, the command, the
// health check's route and port, and that every file it copies exists and is not ignored.
import t from 'tap'
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { join, relative } from 'node:path'
import { SETTINGS } from '../../src/config.js'
import { copiesOf, envOf, execForm, ignoredBy, parseDockerfile, readDockerfile, readDockerignore, ROOT, type Instruction, type Stage } from './dockerfile.js'
import { routeCheck } from './routes.js'

function filesUnder (dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name)
    return entry.isDirectory() ? filesUnder(path) : [path]
  })
}

const { args, stages, final } = readDockerfile()
const byName = new Map(stages.map((stage) => [stage.name, stage]))
const ignore = readDockerignore()
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string>, engines: { node: string } }
const workdir = (stage: Stage): string => stage.instructions.filter((i) => i.op === 'WORKDIR').at(-1)?.args ?? '/'
const runs = (stage: Stage): string => stage.instructions.filter((i) => i.op === 'RUN').map((i) => i.args).join('\n')
const defaultPort = String(SETTINGS.port.default)

t.test('the parser reads what it is given (so the checks below can fail)', async (t) => {
  const sample = parseDockerfile('# c\nFROM a AS b\nRUN x \\\n  # inside\n  && y\nCMD ["node"]\n')
  t.same(sample.map((i) => [i.op, i.args]), [['FROM', 'a AS b'], ['RUN', 'x    && y'], ['CMD', '["node"]']])
  t.equal(execForm({ op: 'CMD', args: 'node dist/src/server.js', line: 1 }), undefined, 'shell form is not exec form')
  t.equal(ignoredBy(['node_modules', '**/__pycache__', '*.md'], 'node_modules/x/y.js'), 'node_modules')
  t.equal(ignoredBy(['**/__pycache__'], 'examples/plugins/a/__pycache__/m.pyc'), '**/__pycache__')
  t.equal(ignoredBy(['*.md'], 'examples/rubrics/acme/x/1.md'), undefined, '*.md only matches at the top level')
  t.equal(ignoredBy(['src', '!src/keep'], 'src/keep'), undefined)
})

t.test('multi-stage: a build stage compiles with dev deps, the runtime stage carries production deps only', async (t) => {
  t.ok(stages.length >= 2, `at least two stages (${stages.map((s) => s.name).join(', ')})`)
  const build = stages.find((stage) => /npm run build/.test(runs(stage)))
  t.ok(build, 'a stage runs npm run build')
  if (build === undefined) return
  t.not(build, final, 'the build does not happen in the runtime stage')
  t.match(runs(build), /npm ci(?![^\n]*--omit=dev)/, 'the build stage installs dev dependencies (tsc)')
  t.notMatch(runs(final), /npm (ci|install)(?![^\n]*--omit=dev)/, 'the runtime stage installs no dev dependencies')

  const copies = copiesOf(final)
  const modules = copies.find((copy) => copy.dest.replace(/\/$/, '').endsWith('node_modules'))
  const prodInstallHere = /npm ci[^\n]*--omit=dev/.test(runs(final))
  if (modules?.from !== undefined) {
    const source = byName.get(modules.from)
    t.ok(source, `node_modules comes from stage ${modules.from}`)
    t.match(source === undefined ? '' : runs(source), /npm ci[^\n]*--omit=dev/, 'that stage installs production dependencies only')
    t.not(source, build, 'not from the build stage, which has dev dependencies')
  } else {
    t.ok(prodInstallHere, 'the runtime stage itself runs npm ci --omit=dev')
  }

  const dist = copies.find((copy) => copy.sources.some((source) => /\/dist\/?$/.test(source)))
  t.equal(dist?.from, build.name, 'dist/ comes from the build stage')
  t.equal(dist?.sources[0].replace(/\/$/, ''), `${workdir(build).replace(/\/$/, '')}/dist`, 'from where the build stage compiled it')
  for (const copy of copies.filter((c) => c.from === undefined)) {
    for (const source of copy.sources) {
      t.notMatch(source, /^(\.\/)?(src|routes|schemas|test|bench|node_modules|dist)\/?$/, `line ${copy.line}: no sources or local modules in the runtime image (${source})`)
    }
  }
})

t.test('the runtime base image is Node 20 or 24 slim, with python3 for Python plugins', async (t) => {
  const base = final.base.replace(/\$\{?NODE_VERSION\}?/, args.get('NODE_VERSION') ?? '')
  t.match(base, /^node:(20|24)(\.[0-9.]+)?-bookworm-slim$/, `runtime base ${final.base}`)
  const major = Number(/^node:(\d+)/.exec(base)?.[1])
  t.ok(major >= Number(/\d+/.exec(pkg.engines.node)?.[0]), `Node ${major} satisfies engines.node ${pkg.engines.node}`)
  t.match(runs(final), /apt-get install[^\n]*\bpython3\b/, 'python3 installed in the runtime stage')
  t.match(runs(final), /apt-get install[^\n]*\butil-linux\b/, 'util-linux (setpriv, chrt: how workers start) named in the runtime stage')
  t.match(runs(final), /rm -rf \/var\/lib\/apt\/lists/, 'apt lists removed in the same layer')
})

t.test('runs as a non-root user, numerically (Kubernetes runAsNonRoot can verify it)', async (t) => {
  const users = final.instructions.filter((i) => i.op === 'USER')
  t.ok(users.length > 0, 'the runtime stage sets USER')
  const user = users.at(-1)?.args ?? 'root'
  const [uid] = user.split(':')
  t.match(uid, /^[0-9]+$/, `numeric uid (${user})`)
  t.not(Number(uid), 0, 'not root')
  const afterUser = final.instructions.slice(final.instructions.indexOf(users.at(-1) as Instruction) + 1)
  t.notOk(afterUser.some((i) => i.op === 'USER'), 'no later USER switches back')
})

t.test('exec-form CMD runs the same file as npm start, and that file is what tsc emits', async (t) => {
  const cmd = execForm(final.instructions.filter((i) => i.op === 'CMD').at(-1))
  t.ok(cmd, 'CMD is exec form (a JSON array), so node is PID 1\'s direct child and gets SIGTERM')
  t.same(cmd, pkg.scripts.start.split(/\s+/), `CMD matches "npm start" (${pkg.scripts.start})`)
  const entry = final.instructions.filter((i) => i.op === 'ENTRYPOINT').at(-1)
  if (entry !== undefined) t.ok(execForm(entry), 'ENTRYPOINT is exec form too')
  const tsconfig = JSON.parse(readFileSync(join(ROOT, 'tsconfig.json'), 'utf8')) as { compilerOptions: { rootDir: string, outDir: string } }
  const script = cmd?.[1] ?? ''
  t.equal(script.split('/')[0], tsconfig.compilerOptions.outDir, 'the script is under tsc\'s outDir')
  t.equal(tsconfig.compilerOptions.rootDir, '.', 'rootDir "." keeps src/ under dist/src')
  const source = join(ROOT, script.replace(/^dist\//, '').replace(/\.js$/, '.ts'))
  t.ok(existsSync(source), `${relative(ROOT, source)} exists`)
})

t.test('listens on 0.0.0.0 at the configured default port, and exposes it', async (t) => {
  const env = envOf(final)
  t.equal(env.get('HOST'), '0.0.0.0', 'HOST=0.0.0.0 (the service default is loopback)')
  t.equal(env.get('PORT'), defaultPort, `PORT matches the PORT setting's default (${defaultPort})`)
  for (const name of env.keys()) {
    if (name.startsWith('ARBITER_')) t.ok(Object.values(SETTINGS).some((s) => s.env === name), `${name} is a known setting`)
  }
  const exposed = final.instructions.filter((i) => i.op === 'EXPOSE').flatMap((i) => i.args.split(/\s+/)).map((p) => p.replace(/\/tcp$/, ''))
  t.same(exposed, [defaultPort], 'EXPOSE the same port')
})

t.test('HEALTHCHECK probes a real liveness route on the container\'s port', async (t) => {
  const healthcheck = final.instructions.find((i) => i.op === 'HEALTHCHECK')
  t.ok(healthcheck, 'HEALTHCHECK present')
  if (healthcheck === undefined) return
  const command = execForm({ ...healthcheck, args: healthcheck.args.replace(/^.*?\bCMD\s+/s, '') })
  t.ok(command, 'exec form (slim images have no shell tools such as curl anyway)')
  t.equal(command?.[0], 'node', 'uses node, present in the image')
  const script = command?.at(-1) ?? ''
  const url = /['"`]http:\/\/(127\.0\.0\.1|localhost):['"`]\s*\+\s*\(process\.env\.PORT\s*\|\|\s*(\d+)\)\s*\+\s*['"`](\/[^'"`]*)['"`]/.exec(script)
  t.ok(url, `finds host, port and path in: ${script}`)
  if (url === null) return
  t.equal(url[2], defaultPort, 'the fallback port is the PORT default')
  const path = url[3]
  const routes = await routeCheck(t)
  t.equal(await routes.status(path), 200, `GET ${path} is a route that answers 200\n${routes.printed}`)
  t.equal(await routes.statusWhileDraining(path), 200, `${path} stays 200 while draining: a health check must not kill a pod finishing its work`)
  t.match(healthcheck.args, /--start-period=\d+s/, 'a start period covers catalogue loading')
})

t.test('every file the Dockerfile copies from the context exists and is not in .dockerignore', async (t) => {
  for (const stage of stages) {
    for (const copy of copiesOf(stage).filter((c) => c.from === undefined)) {
      for (const source of copy.sources) {
        const path = source.replace(/^\.\//, '').replace(/\/$/, '')
        t.ok(existsSync(join(ROOT, path)), `line ${copy.line}: ${path} exists`)
        t.equal(ignoredBy(ignore, path), undefined, `line ${copy.line}: ${path} is not excluded by .dockerignore`)
      }
    }
  }
  for (const noise of ['node_modules', 'dist', '.git', 'test', 'coverage', '.tap']) {
    t.ok(ignoredBy(ignore, noise), `${noise} stays out of the build context`)
  }
})

t.test('every non-TypeScript file under src/ (tsc does not emit them) reaches the runtime image', async (t) => {
  const copied = copiesOf(final).filter((c) => c.from === undefined).flatMap((c) => c.sources.map((s) => s.replace(/^\.\//, '').replace(/\/$/, '')))
  const assets = filesUnder(join(ROOT, 'src')).map((file) => relative(ROOT, file).split('\\').join('/'))
    .filter((file) => !file.endsWith('.ts') && !file.includes('__pycache__') && statSync(join(ROOT, file)).isFile())
  for (const asset of assets) {
    const by = copied.find((source) => asset === source || asset.startsWith(`${source}/`))
    t.ok(by, `${asset} is copied into the runtime image`)
    if (by !== undefined) {
      const copy = copiesOf(final).find((c) => c.sources.some((s) => s.replace(/^\.\//, '').replace(/\/$/, '') === by))
      t.equal(copy?.dest.replace(/^\.\//, '').replace(/\/$/, ''), by, `${by} keeps its path relative to WORKDIR, where the code looks for it`)
    }
  }
  t.ok(copied.includes('examples'), 'examples/ ships: the embedded defaults serve examples/plugins and examples/rubrics')
  t.ok(copied.includes('package.json'), 'package.json ships: "type": "module" and the version')
  t.equal(workdir(final), '/app')
})

t.test('npm ci --omit=dev is enough: every package the built code imports is a production dependency', async (t) => {
  const pkgDeps = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { dependencies?: Record<string, string> }
  const build = stages.find((stage) => /npm run build/.test(runs(stage)))
  const sources = copiesOf(build ?? final).filter((c) => c.from === undefined).flatMap((c) => c.sources)
    .map((s) => s.replace(/^\.\//, '').replace(/\/$/, '')).filter((s) => existsSync(join(ROOT, s)) && statSync(join(ROOT, s)).isDirectory())
  t.ok(sources.includes('src'), `the build stage compiles ${sources.join(', ')}`)
  const imported = new Map<string, string>()
  const patterns = [
    /^\s*(?:import|export)\s+(?!type[\s{])[^'";]*?\bfrom\s+['"]([^'"]+)['"]/gm,
    /^\s*import\s+['"]([^'"]+)['"]/gm,
    /\bimport\(\s*['"]([^'"]+)['"]\s*\)/g
  ]
  for (const file of sources.flatMap((source) => filesUnder(join(ROOT, source))).filter((f) => f.endsWith('.ts'))) {
    const text = readFileSync(file, 'utf8')
    for (const pattern of patterns) {
      for (const match of text.matchAll(pattern)) {
        const specifier = match[1]
        if (specifier.startsWith('.') || specifier.startsWith('node:') || specifier.startsWith('/')) continue
        const name = specifier.startsWith('@') ? specifier.split('/').slice(0, 2).join('/') : specifier.split('/')[0]
        if (!imported.has(name)) imported.set(name, relative(ROOT, file))
      }
    }
  }
  t.ok(imported.size > 0, `packages imported: ${[...imported.keys()].join(', ')}`)
  for (const [name, file] of imported) {
    t.ok(pkgDeps.dependencies?.[name], `${name} (imported by ${file}) is in dependencies, so the runtime image has it`)
  }
})
