// Every manifest under deploy/kubernetes/ parsed with `yaml` and checked against the service
// itself: env names against SETTINGS (and their values through loadConfig), probe paths against
// the real app's routes (ready and draining), ports against the config and the image, the grace
// period against ARBITER_GRACE_S, and the mounted rubric and plugin ConfigMaps laid out the way
// the kubelet lays them out, then loaded by the real rubric store and plugin catalogue.
import t from 'tap'
import { mkdtempSync, mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { parseAllDocuments } from 'yaml'
import { defaultConfig, loadConfig, SETTINGS, type Config } from '../../src/config.js'
import { scanPlugins } from '../../src/kinds/plugin/catalog.js'
import { loadSnapshot } from '../../src/kinds/rubric/store.js'
import { envOf, readDockerfile, ROOT } from './dockerfile.js'
import { routeCheck } from './routes.js'

type Obj = Record<string, any>

const DIR = join(ROOT, 'deploy', 'kubernetes')
const files = readdirSync(DIR).filter((name) => /\.ya?ml$/.test(name)).sort()
const documents: Array<{ file: string, doc: Obj }> = files.flatMap((file) =>
  parseAllDocuments(readFileSync(join(DIR, file), 'utf8')).map((document) => {
    if (document.errors.length > 0) throw new Error(`${file}: ${document.errors[0].message}`)
    return { file, doc: document.toJS() as Obj }
  }).filter(({ doc }) => doc !== null)
)
const manifests = documents.filter(({ doc }) => doc.kind !== 'Kustomization')

function one (kind: string, name?: string): Obj {
  const found = manifests.filter(({ doc }) => doc.kind === kind && (name === undefined || doc.metadata?.name === name))
  if (found.length !== 1) throw new Error(`expected one ${kind}${name === undefined ? '' : ` named ${name}`}, found ${found.length}`)
  return found[0].doc
}

const deployment = one('Deployment')
const pod = deployment.spec.template.spec as Obj
const container = (pod.containers as Obj[]).find((c) => c.name === 'arbiter') as Obj
const service = one('Service')
const hpa = one('HorizontalPodAutoscaler')
const pdb = one('PodDisruptionBudget')
const secretExample = one('Secret')
const configMaps = new Map(manifests.filter(({ doc }) => doc.kind === 'ConfigMap').map(({ doc }) => [doc.metadata.name as string, doc]))
const knownEnv = new Set(Object.values(SETTINGS).map((setting) => setting.env))
const image = readDockerfile()
const imageEnv = envOf(image.final)

/** Kubernetes quantities → bytes or cores. */
function quantity (value: string | number): number {
  const match = /^([0-9.]+)(m|k|M|G|T|Ki|Mi|Gi|Ti)?$/.exec(String(value))
  if (match === null) throw new Error(`not a quantity: ${value}`)
  const units: Record<string, number> = { '': 1, m: 1e-3, k: 1e3, M: 1e6, G: 1e9, T: 1e12, Ki: 1024, Mi: 1024 ** 2, Gi: 1024 ** 3, Ti: 1024 ** 4 }
  return Number(match[1]) * units[match[2] ?? '']
}

/** The variables the kubelet injects for each Service in the namespace unless enableServiceLinks is false. */
function serviceLinks (): Record<string, string> {
  if (pod.enableServiceLinks === false) return {}
  const env: Record<string, string> = {}
  for (const { doc } of manifests.filter(({ doc }) => doc.kind === 'Service')) {
    const name = String(doc.metadata.name).toUpperCase().replace(/-/g, '_')
    const [first] = doc.spec.ports as Obj[]
    env[`${name}_SERVICE_HOST`] = '10.0.0.10'
    env[`${name}_SERVICE_PORT`] = String(first.port)
    env[`${name}_PORT`] = `tcp://10.0.0.10:${first.port}`
    env[`${name}_PORT_${first.port}_TCP_ADDR`] = '10.0.0.10'
  }
  return env
}

/** The container's environment as the process sees it: image ENV, then envFrom, then env. */
function containerEnv (links: Record<string, string>): Record<string, string> {
  const env: Record<string, string> = { ...Object.fromEntries(imageEnv), ...links }
  for (const source of container.envFrom ?? []) {
    const map = configMaps.get(source.configMapRef?.name)
    if (map === undefined) throw new Error(`envFrom names ConfigMap ${source.configMapRef?.name}, not in deploy/kubernetes`)
    Object.assign(env, map.data)
  }
  for (const variable of container.env ?? []) {
    const ref = variable.valueFrom?.secretKeyRef
    if (ref !== undefined) {
      const value = secretExample.metadata.name === ref.name ? secretExample.stringData?.[ref.key] : undefined
      if (value !== undefined) env[variable.name] = value
    } else if (variable.value !== undefined) {
      env[variable.name] = String(variable.value)
    }
  }
  return env
}

// The settings the pod runs with (service links are checked on their own below). A failure is
// reported by the "whole environment loads" test; the other tests go on with the defaults.
let configProblem: unknown
const config: Config = ((): Config => {
  try {
    return loadConfig(containerEnv({}))
  } catch (error) {
    configProblem = error
    return { ...defaultConfig }
  }
})()

function portNamed (port: string | number): number | undefined {
  if (typeof port === 'number') return port
  return (container.ports as Obj[]).find((p) => p.name === port)?.containerPort
}

function matches (selector: Obj, labels: Obj): boolean {
  return Object.entries(selector).every(([key, value]) => labels[key] === value)
}

t.test('every manifest parses, and kustomization.yaml applies all of them but the Secret example', async (t) => {
  t.ok(manifests.length >= 7, `${manifests.length} manifests in ${files.join(', ')}`)
  for (const { file, doc } of manifests) {
    t.type(doc.apiVersion, 'string', `${file}: apiVersion`)
    t.type(doc.kind, 'string', `${file}: kind`)
    t.type(doc.metadata?.name, 'string', `${file}: metadata.name`)
  }
  const kustomization = documents.find(({ doc }) => doc.kind === 'Kustomization')?.doc
  t.ok(kustomization, 'kustomization.yaml present')
  const listed = new Set<string>(kustomization?.resources ?? [])
  for (const file of files.filter((f) => f !== 'kustomization.yaml')) {
    if (file === 'secret.example.yaml') t.notOk(listed.has(file), 'the placeholder Secret is never applied by accident')
    else t.ok(listed.has(file), `${file} is in kustomization.yaml`)
  }
  for (const file of listed) t.ok(files.includes(file), `${file} (kustomization) exists`)
})

t.test('every environment variable is a known setting, and the whole environment loads', async (t) => {
  const names = new Set<string>()
  for (const variable of container.env ?? []) names.add(variable.name)
  for (const source of container.envFrom ?? []) for (const key of Object.keys(configMaps.get(source.configMapRef.name)?.data ?? {})) names.add(key)
  t.ok(names.size > 0)
  for (const name of names) t.ok(knownEnv.has(name), `${name} is a setting in src/config.ts`)
  t.equal(configProblem, undefined, 'loadConfig accepts the container environment (values included)')
  t.doesNotThrow(() => loadConfig(containerEnv(serviceLinks())), 'with whatever service links the pod gets')
  t.equal(container.envFrom?.every((source: Obj) => source.prefix === undefined), true, 'no envFrom prefix renames the settings')
})

t.test('service links: off in the pod, and harmless if someone turns them on', async (t) => {
  t.equal(pod.enableServiceLinks, false, 'the pod gets no ARBITER_* service-link variables')
  // Were they on, the kubelet would add ARBITER_SERVICE_HOST, ARBITER_PORT, ...; the config
  // recognises that pattern (a name with its _SERVICE_HOST sibling) instead of refusing it.
  const saved = pod.enableServiceLinks
  pod.enableServiceLinks = true
  try {
    t.doesNotThrow(() => loadConfig(containerEnv(serviceLinks())))
  } finally {
    pod.enableServiceLinks = saved
  }
})

t.test('ports: the container port is the configured PORT on 0.0.0.0; Service and probes reach it', async (t) => {
  const http = (container.ports as Obj[]).find((p) => p.name === 'http')
  t.ok(http, 'a container port named http')
  t.equal(http?.containerPort, config.port, `containerPort is PORT (${config.port})`)
  t.equal(config.port, SETTINGS.port.default, 'the default port, as the image EXPOSEs it')
  t.ok(['0.0.0.0', '::'].includes(config.host), `HOST is ${config.host}: reachable from the kubelet and the Service`)
  const [servicePort] = service.spec.ports as Obj[]
  t.equal(portNamed(servicePort.targetPort), config.port, 'Service targetPort resolves to the container port')
  for (const probe of ['startupProbe', 'livenessProbe', 'readinessProbe']) {
    t.equal(portNamed(container[probe]?.httpGet?.port), config.port, `${probe} port resolves to the container port`)
  }
})

t.test('probes name real routes: liveness stays 200 while draining, readiness turns 503', async (t) => {
  const routes = await routeCheck(t)
  const path = (probe: string): string => container[probe]?.httpGet?.path
  for (const probe of ['startupProbe', 'livenessProbe', 'readinessProbe']) t.type(path(probe), 'string', `${probe} is an httpGet probe`)
  t.equal(path('livenessProbe'), '/healthz')
  t.equal(await routes.status(path('livenessProbe')), 200, `liveness ${path('livenessProbe')} answers 200\n${routes.printed}`)
  t.equal(await routes.statusWhileDraining(path('livenessProbe')), 200, 'a draining pod is not killed by its liveness probe')
  t.equal(path('readinessProbe'), '/readyz')
  t.not(await routes.status(path('readinessProbe')), 404, `readiness ${path('readinessProbe')} is a route`)
  t.equal(await routes.statusWhileDraining(path('readinessProbe')), 503, 'a draining pod leaves the Service')
  t.equal(await routes.status(path('startupProbe')), 200, `startup ${path('startupProbe')} answers 200`)
  const startup = container.startupProbe
  t.ok(startup.periodSeconds * startup.failureThreshold >= 60, 'the startup probe allows at least a minute to load catalogues')
})

t.test('terminationGracePeriodSeconds is above ARBITER_GRACE_S plus the preStop pause', async (t) => {
  const preStop = container.lifecycle?.preStop?.exec?.command as string[] | undefined
  const pause = preStop !== undefined && preStop[0] === 'sleep' ? Number(preStop[1]) : 0
  t.ok(pause > 0, 'a preStop pause lets endpoints drop the pod before SIGTERM')
  t.ok(pod.terminationGracePeriodSeconds > config.graceS + pause,
    `terminationGracePeriodSeconds ${pod.terminationGracePeriodSeconds} > ARBITER_GRACE_S ${config.graceS} + preStop ${pause}`)
  t.ok(config.graceS > config.maxTimeoutS, `ARBITER_GRACE_S ${config.graceS} outlasts the longest verification deadline ${config.maxTimeoutS}`)
})

t.test('non-root, as the image\'s user, with a read-only root and a writable /tmp', async (t) => {
  const [uid] = (image.final.instructions.filter((i) => i.op === 'USER').at(-1)?.args ?? '0').split(':')
  t.equal(pod.securityContext?.runAsNonRoot, true)
  t.equal(pod.securityContext?.runAsUser, Number(uid), `runAsUser is the image's USER (${uid})`)
  t.not(pod.securityContext?.runAsUser, 0)
  t.equal(pod.securityContext?.seccompProfile?.type, 'RuntimeDefault')
  t.equal(container.securityContext?.allowPrivilegeEscalation, false)
  t.equal(container.securityContext?.readOnlyRootFilesystem, true)
  t.same(container.securityContext?.capabilities?.drop, ['ALL'])
  t.equal(pod.automountServiceAccountToken, false, 'Arbiter never talks to the Kubernetes API')
  const tmp = (container.volumeMounts as Obj[]).find((m) => m.mountPath === '/tmp')
  t.ok(tmp, '/tmp is a mounted volume (the root filesystem is read-only)')
  t.ok((pod.volumes as Obj[]).find((v) => v.name === tmp?.name)?.emptyDir, '/tmp is an emptyDir')
})

t.test('the judge key and API tokens come from the Secret, never from a ConfigMap or a literal', async (t) => {
  for (const name of ['ARBITER_JUDGE_API_KEY', 'ARBITER_API_TOKENS']) {
    const variable = (container.env as Obj[]).find((v) => v.name === name)
    t.ok(variable?.valueFrom?.secretKeyRef, `${name} from a secretKeyRef`)
    t.equal(variable?.value, undefined, `${name} has no literal value`)
    const ref = variable?.valueFrom?.secretKeyRef ?? {}
    t.equal(ref.name, secretExample.metadata.name, `${name}: the Secret is the one secret.example.yaml documents`)
    t.ok(ref.key in (secretExample.stringData ?? {}), `${name}: key ${ref.key} is in secret.example.yaml`)
    for (const [mapName, map] of configMaps) t.notOk(name in (map.data ?? {}), `${name} is not in ConfigMap ${mapName}`)
  }
  const tokens = (container.env as Obj[]).find((v) => v.name === 'ARBITER_API_TOKENS')
  t.not(tokens?.valueFrom?.secretKeyRef?.optional, true, 'tokens are required: a missing Secret must not start the service unauthenticated')
  t.ok(config.apiTokens.length > 0, 'with the example Secret, authentication is on')
  t.ok(config.judgeApiKey, 'and the judge key reaches the config')
})

/** Writes a configMap volume the way the kubelet does: files in a timestamped folder, `..data` pointing at it, symlinks on top. */
function materialize (root: string, volume: Obj): void {
  const map = configMaps.get(volume.configMap.name)
  if (map === undefined) throw new Error(`volume ${volume.name} names ConfigMap ${volume.configMap.name}, not in deploy/kubernetes`)
  const items: Array<{ key: string, path: string }> = volume.configMap.items ?? Object.keys(map.data).map((key) => ({ key, path: key }))
  const stamp = '..2026_01_01_00_00_00.000000001'
  for (const item of items) {
    const file = join(root, stamp, item.path)
    mkdirSync(dirname(file), { recursive: true })
    writeFileSync(file, String(map.data[item.key]))
  }
  symlinkSync(stamp, join(root, '..data'))
  for (const top of new Set(items.map((item) => item.path.split('/')[0]))) symlinkSync(join('..data', top), join(root, top))
}

t.test('rubrics and plugins are mounted at ARBITER_RUBRICS_DIR / ARBITER_PLUGINS_DIR and load as mounted', async (t) => {
  const mounts = new Map((container.volumeMounts as Obj[]).map((m) => [m.mountPath as string, m]))
  const volumes = new Map((pod.volumes as Obj[]).map((v) => [v.name as string, v]))
  const scratch = mkdtempSync(join(tmpdir(), 'arbiter-k8s-'))
  t.teardown(() => rmSync(scratch, { recursive: true, force: true }))

  for (const [setting, dir] of [['ARBITER_RUBRICS_DIR', config.rubricsDir], ['ARBITER_PLUGINS_DIR', config.pluginsDir]] as const) {
    const mount = mounts.get(dir)
    t.ok(mount, `${setting}=${dir} is a volume mount`)
    t.equal(mount?.readOnly, true, `${dir} is mounted read-only`)
    const volume = volumes.get(mount?.name)
    t.ok(volume?.configMap, `${dir} comes from a ConfigMap`)
    const map = configMaps.get(volume?.configMap?.name)
    t.ok(map, `ConfigMap ${volume?.configMap?.name} is in deploy/kubernetes`)
    const mapped = new Set<string>((volume?.configMap?.items ?? []).map((item: Obj) => item.key))
    for (const key of Object.keys(map?.data ?? {})) t.ok(mapped.has(key), `${key} is mapped to a path by the volume's items`)
    for (const key of mapped) t.ok(key in (map?.data ?? {}), `item ${String(key)} exists in the ConfigMap`)
  }

  const rubricsRoot = join(scratch, 'rubrics')
  const pluginsRoot = join(scratch, 'plugins')
  materialize(rubricsRoot, volumes.get(mounts.get(config.rubricsDir)?.name) as Obj)
  materialize(pluginsRoot, volumes.get(mounts.get(config.pluginsDir)?.name) as Obj)

  const rubrics = await loadSnapshot(rubricsRoot)
  t.same(rubrics.invalid, [], 'no rubric is invalid')
  t.ok(rubrics.rubrics.size > 0, `rubrics loaded: ${[...rubrics.rubrics.keys()].join(', ')}`)

  const catalog = await scanPlugins(pluginsRoot)
  t.ok(catalog.plugins.length > 0, 'plugins found')
  for (const plugin of catalog.plugins) t.equal(plugin.status, 'vetted', `${plugin.folder}: ${plugin.reason ?? 'vetted'}`)

  // Plugin workers are processes inside the container's memory limit.
  const limit = quantity(container.resources?.limits?.memory)
  const workers = catalog.plugins.length * config.pluginWorkers * config.pluginMemoryMb * 1024 ** 2
  t.ok(limit >= workers + 512 * 1024 ** 2,
    `memory limit ${container.resources.limits.memory} covers ${catalog.plugins.length} plugin(s) x ${config.pluginWorkers} workers x ${config.pluginMemoryMb} MiB + 512 MiB for Node`)
})

t.test('resources, labels and selectors hang together; HPA and PDB leave room to drain', async (t) => {
  t.ok(quantity(container.resources?.requests?.cpu) > 0, 'a CPU request (the HPA scales on utilization of it)')
  t.ok(quantity(container.resources?.requests?.memory) > 0, 'a memory request')
  t.ok(quantity(container.resources?.limits?.memory) >= quantity(container.resources?.requests?.memory), 'memory limit at or above the request')
  const labels = deployment.spec.template.metadata.labels as Obj
  t.ok(matches(deployment.spec.selector.matchLabels, labels), 'Deployment selector matches its pods')
  t.ok(matches(service.spec.selector, labels), 'Service selector matches the pods')
  t.ok(matches(pdb.spec.selector.matchLabels, labels), 'PDB selector matches the pods')
  t.same(hpa.spec.scaleTargetRef, { apiVersion: 'apps/v1', kind: 'Deployment', name: deployment.metadata.name }, 'HPA scales the Deployment')
  t.equal(deployment.spec.replicas, undefined, 'no replicas in the Deployment: the HPA owns the count')
  t.ok(hpa.spec.minReplicas >= 2, 'at least two replicas, so one can drain while the other serves')
  t.ok(hpa.spec.maxReplicas >= hpa.spec.minReplicas)
  const cpu = (hpa.spec.metrics as Obj[]).find((m) => m.resource?.name === 'cpu')
  t.ok(cpu, 'the HPA scales on CPU')
  const allowed = pdb.spec.maxUnavailable !== undefined ? Number(pdb.spec.maxUnavailable) : hpa.spec.minReplicas - Number(pdb.spec.minAvailable)
  t.ok(allowed >= 1, 'the PDB lets a node drain evict at least one pod')
  t.equal(deployment.spec.strategy?.rollingUpdate?.maxUnavailable, 0, 'rollouts add a pod before removing one')
})
