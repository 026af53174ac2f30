// TransactWriteItems for dynalite, which lacks it, served in dynalite's own
// process from its single-item calls.
//
// Every call through wrap() runs alone, one after another, so no call sees a
// transaction half done. A transaction runs each member as one conditional
// PutItem, UpdateItem or DeleteItem that answers the item as it was before
// (ReturnValues ALL_OLD); when a member fails, the members written before it
// are put back from those answers, in reverse. Conditions, expressions, item
// sizes and everything a single write does are dynalite's; only the grouping
// is this file's. The calls reach dynalite's own request handler in process,
// not over a socket, so a transaction costs dynalite's work and nothing more.
//
// A call is read whole before dynalite sees any of it: dynalite ends its
// process on a request cut off mid-way (it throws on the aborted request),
// and a caller that goes away does not stop what was started (DynamoDB, too,
// finishes a call whose caller left).
'use strict'

const crypto = require('crypto')
const { EventEmitter } = require('events')

const TARGET = 'DynamoDB_20120810.'
const ERR_PREFIX = 'com.amazonaws.dynamodb.v20120810#'
const AMZ_JSON = 'application/x-amz-json-1.0'
const MAX_MEMBERS = 100
// TOKEN_WINDOW_MS is how long a committed transaction's ClientRequestToken is
// remembered, as DynamoDB documents for TransactWriteItems.
const TOKEN_WINDOW_MS = 10 * 60 * 1000
// CLOCK_TARGET advances the clock of the token window, for tests of it.
const CLOCK_TARGET = 'FleetqDynalite.AdvanceClock'
const WRITE_OPS = { Put: 'PutItem', Update: 'UpdateItem', Delete: 'DeleteItem' }

// wrap returns a request handler that serves TransactWriteItems itself and
// hands every other call to dynalite's handler, one call at a time.
function wrap (dynaliteHandler) {
  const keyNames = new Map() // table -> key attribute names
  const tokens = new Map() // ClientRequestToken -> { digest, at }
  let clockOffset = 0
  let tail = Promise.resolve()
  const now = () => Date.now() + clockOffset

  // serial runs fn after every call queued before it.
  function serial (fn) {
    const run = tail.then(fn)
    tail = run.catch(() => {})
    return run
  }

  // invoke hands one call to dynalite in process and answers
  // { status, headers, body }.
  function invoke (headers, body) {
    return new Promise((resolve) => {
      const req = new EventEmitter()
      req.method = 'POST'
      req.url = '/'
      req.headers = headers
      const res = {
        statusCode: 200,
        headers: {},
        setHeader (k, v) { this.headers[k.toLowerCase()] = String(v) },
        getHeader (k) { return this.headers[k.toLowerCase()] },
        end (data) { resolve({ status: this.statusCode, headers: this.headers, body: data === undefined ? '' : String(data) }) },
      }
      dynaliteHandler(req, res)
      if (body.length) req.emit('data', Buffer.from(body))
      req.emit('end')
    })
  }

  // call sends one operation to dynalite with the credentials of the
  // request it serves; it answers the decoded output, or throws an apiError.
  async function call (auth, op, input) {
    const headers = Object.assign({ 'content-type': AMZ_JSON, 'x-amz-target': TARGET + op }, auth)
    const out = await invoke(headers, JSON.stringify(input))
    const parsed = out.body ? JSON.parse(out.body) : {}
    if (out.status !== 200) {
      const type = parsed.__type || ''
      const err = new Error(type)
      err.apiError = { status: out.status, code: type.slice(type.lastIndexOf('#') + 1), message: (parsed.message || '') + (parsed.Message || ''), body: out.body }
      throw err
    }
    return parsed
  }

  async function tableKeys (auth, table) {
    if (!keyNames.has(table)) {
      const out = await call(auth, 'DescribeTable', { TableName: table })
      keyNames.set(table, out.Table.KeySchema.map((k) => k.AttributeName))
    }
    return keyNames.get(table)
  }

  // parse reads one member: its kind, table and key.
  async function parse (auth, member) {
    const kinds = Object.keys(member || {})
    if (kinds.length !== 1) throw validation(`a TransactWriteItem has exactly one of Put, Update, Delete and ConditionCheck, got ${kinds.length}`)
    const kind = kinds[0]
    if (!['Put', 'Update', 'Delete', 'ConditionCheck'].includes(kind)) throw validation(`unknown TransactWriteItem member "${kind}"`)
    const fields = Object.assign({}, member[kind])
    if (typeof fields.TableName !== 'string' || !fields.TableName) throw validation(`${kind}: TableName is required`)
    const a = { kind, fields, table: fields.TableName, oldOnFail: fields.ReturnValuesOnConditionCheckFailure === 'ALL_OLD', before: null }
    delete fields.ReturnValuesOnConditionCheckFailure
    if (kind !== 'Put') {
      if (!fields.Key || !Object.keys(fields.Key).length) throw validation(`${kind}: Key is required`)
      a.key = fields.Key
      return a
    }
    if (!fields.Item || !Object.keys(fields.Item).length) throw validation('Put: Item is required')
    a.key = {}
    for (const n of await tableKeys(auth, a.table)) {
      if (!(n in fields.Item)) throw validation('One of the required keys was not given a value')
      a.key[n] = fields.Item[n]
    }
    return a
  }

  // snapshot reads a member's item, consistently, into a.before.
  async function snapshot (auth, a) {
    const out = await call(auth, 'GetItem', { TableName: a.table, Key: a.key, ConsistentRead: true })
    a.before = out.Item || null
  }

  // check evaluates a ConditionCheck with a write that changes nothing: the
  // item put back as it was under the condition, or, when there is none, a
  // conditional delete of the missing key. The names and values a member
  // carries may serve more than its condition; the check takes those its
  // condition uses (DynamoDB refuses unused ones).
  async function check (auth, a) {
    const cond = a.fields.ConditionExpression || ''
    const used = new Set(cond.match(/[#:][A-Za-z0-9_]+/g) || [])
    const w = { TableName: a.table, ConditionExpression: cond }
    for (const f of ['ExpressionAttributeNames', 'ExpressionAttributeValues']) {
      const kept = Object.fromEntries(Object.entries(a.fields[f] || {}).filter(([k]) => used.has(k)))
      if (Object.keys(kept).length) w[f] = kept
    }
    if (a.before) {
      w.Item = a.before
      return call(auth, 'PutItem', w)
    }
    w.Key = a.key
    return call(auth, 'DeleteItem', w)
  }

  // apply runs one member as a single conditional write and keeps the item
  // as it was before in a.before (the write's own ALL_OLD answer). A
  // ConditionCheck reads the item first. When a write's condition fails and
  // the member wants the item it failed on, a read takes it: the transaction
  // runs alone, so nothing changed it meanwhile.
  async function apply (auth, a) {
    const op = WRITE_OPS[a.kind]
    if (!op) {
      await snapshot(auth, a)
      return check(auth, a)
    }
    try {
      const out = await call(auth, op, Object.assign({}, a.fields, { ReturnValues: 'ALL_OLD' }))
      a.before = out.Attributes || null
    }
    catch (err) {
      if (err.apiError && err.apiError.code === 'ConditionalCheckFailedException' && a.oldOnFail) await snapshot(auth, a)
      throw err
    }
  }

  // restore puts back, in reverse, the items of members already applied.
  async function restore (auth, done) {
    for (let i = done.length - 1; i >= 0; i--) {
      const a = done[i]
      if (a.kind === 'ConditionCheck') continue
      if (a.before) await call(auth, 'PutItem', { TableName: a.table, Item: a.before })
      else await call(auth, 'DeleteItem', { TableName: a.table, Key: a.key })
    }
  }

  // cancel answers TransactionCanceledException for a transaction whose
  // member failed (its writes already undone), with one reason per member as
  // DynamoDB gives them: every later member with a condition is checked too,
  // against the state before the transaction, so each failing condition is
  // named; the rest are None.
  async function cancel (auth, actions, failed, apiError) {
    const reasons = actions.map(() => ({ Code: 'None' }))
    const conditionFailed = (i) => {
      reasons[i] = { Code: 'ConditionalCheckFailed', Message: 'The conditional request failed' }
      if (actions[i].oldOnFail && actions[i].before) reasons[i].Item = actions[i].before
    }
    if (apiError.code === 'ConditionalCheckFailedException') conditionFailed(failed)
    else reasons[failed] = { Code: 'ValidationError', Message: apiError.message }
    for (let i = failed + 1; i < actions.length; i++) {
      const a = actions[i]
      if (!('ConditionExpression' in a.fields)) continue
      await snapshot(auth, a)
      try {
        await check(auth, a)
      }
      catch (err) {
        if (!err.apiError || err.apiError.code !== 'ConditionalCheckFailedException') throw err
        conditionFailed(i)
      }
    }
    return answer(400, {
      __type: ERR_PREFIX + 'TransactionCanceledException',
      Message: 'Transaction cancelled, please refer cancellation reasons for specific reasons [' + reasons.map((r) => r.Code).join(', ') + ']',
      CancellationReasons: reasons,
    })
  }

  async function transactWrite (headers, body) {
    const auth = { authorization: headers.authorization, 'x-amz-date': headers['x-amz-date'] }
    let input
    try {
      input = JSON.parse(body)
    }
    catch (err) {
      return errorAnswer(400, 'SerializationException', err.message)
    }
    const members = Array.isArray(input.TransactItems) ? input.TransactItems : []
    if (members.length === 0 || members.length > MAX_MEMBERS) {
      return errorAnswer(400, 'ValidationException',
        `1 validation error detected: Value at 'transactItems' failed to satisfy constraint: Member must have length between 1 and ${MAX_MEMBERS}`)
    }
    const token = input.ClientRequestToken || ''
    // Only a transaction with a token is remembered, so only its body is hashed.
    const digest = token ? crypto.createHash('sha256').update(body).digest('hex') : ''
    const prev = token && tokens.get(token)
    if (prev && now() - prev.at < TOKEN_WINDOW_MS) {
      if (prev.digest !== digest) {
        return errorAnswer(400, 'IdempotentParameterMismatchException', 'The request uses the same client token as a previous, but non-identical request.')
      }
      return answer(200, {})
    }
    const actions = []
    const seen = new Set()
    try {
      for (const m of members) {
        const a = await parse(auth, m)
        const id = a.table + '\0' + canonical(a.key)
        if (seen.has(id)) return errorAnswer(400, 'ValidationException', 'Transaction request cannot include multiple operations on one item')
        seen.add(id)
        actions.push(a)
      }
    }
    catch (err) {
      if (err.apiError) return { status: err.apiError.status, body: err.apiError.body }
      if (err.validation) return errorAnswer(400, 'ValidationException', err.message)
      throw err
    }
    for (let i = 0; i < actions.length; i++) {
      try {
        await apply(auth, actions[i])
      }
      catch (err) {
        const e = err.apiError
        const cancelable = e && (e.code === 'ConditionalCheckFailedException' ||
          (e.code === 'ValidationException' && e.message.includes('exceeded the maximum allowed size')))
        try {
          await restore(auth, actions.slice(0, i))
          if (cancelable) return await cancel(auth, actions, i, e)
        }
        catch (rerr) {
          return errorAnswer(500, 'InternalServerError', `a canceled transaction: ${rerr.message}`)
        }
        if (e) return { status: e.status, body: e.body }
        return errorAnswer(500, 'InternalServerError', err.message)
      }
    }
    if (token) {
      for (const [t, use] of tokens) {
        if (now() - use.at >= TOKEN_WINDOW_MS) tokens.delete(t)
      }
      tokens.set(token, { digest, at: now() })
    }
    return answer(200, {})
  }

  // serve answers one whole call.
  async function serve (headers, body) {
    const target = headers['x-amz-target'] || ''
    if (target === TARGET + 'TransactWriteItems') return transactWrite(headers, body)
    if (target === CLOCK_TARGET) {
      clockOffset += Number(JSON.parse(body).Milliseconds) || 0
      return answer(200, {})
    }
    return invoke(headers, body)
  }

  return function handle (req, res) {
    const chunks = []
    req.on('error', () => {}) // a caller gone mid-way: nothing was started
    req.on('data', (c) => chunks.push(c))
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString()
      const send = (out) => {
        if (res.destroyed) return
        const headers = Object.assign({ 'content-type': AMZ_JSON }, out.headers || {})
        delete headers['transfer-encoding'] // the answer is whole: its length is known
        headers['content-length'] = Buffer.byteLength(out.body)
        res.writeHead(out.status, headers)
        res.end(out.body)
      }
      serial(() => serve(req.headers, body)).then(send, (err) => send(errorAnswer(500, 'InternalServerError', err.message)))
    })
  }
}

// validation is a fault of the request itself, answered 400
// ValidationException; any other error of a transaction is answered 500.
function validation (message) {
  const err = new Error(message)
  err.validation = true
  return err
}

function answer (status, value) {
  return { status, body: JSON.stringify(value) }
}

function errorAnswer (status, code, message) {
  return answer(status, { __type: ERR_PREFIX + code, message })
}

// canonical renders a key the same whatever its attributes' order.
function canonical (key) {
  return Object.keys(key).sort().map((n) => n + '=' + JSON.stringify(key[n])).join(';')
}

module.exports = { wrap, TOKEN_WINDOW_MS, CLOCK_TARGET }
