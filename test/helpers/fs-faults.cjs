'use strict';
/**
 * Injected file faults for a `serve` under test, loaded with `node --require`: while the JSON file named by
 * AGENT_ACCESS_TEST_FS_FAULTS says so, chosen file operations fail as a full disk (ENOSPC), a failing disk (EIO) or
 * an immutable file (EPERM) would, on every user's machine and without root. The file is read at each operation, so a
 * test arms and clears faults while the server runs:
 *
 *   {"write": {"code": "ENOSPC", "name": "^state\\.(journal|charges)"}, "rename": {"code": "EPERM", "name": "^state\\.json$"}}
 *
 * `write` fails a write to a file whose base name matches `name` (writeSync, or a write of a FileHandle from
 * fs/promises), `rename` fails a rename onto one. Nothing else changes: the server's code runs as it does in production
 * (its modules call node:fs and node:fs/promises through the module objects, whose exports are synced below).
 */
const fs = require('node:fs');
const { syncBuiltinESMExports } = require('node:module');
const { basename } = require('node:path');
const process = require('node:process');

const control = process.env.AGENT_ACCESS_TEST_FS_FAULTS;
if (control) {
  const original = { openSync: fs.openSync, closeSync: fs.closeSync, writeSync: fs.writeSync, renameSync: fs.renameSync };
  /** The path each open descriptor was opened with. */
  const opened = new Map();
  const rule = (op) => {
    try {
      return JSON.parse(fs.readFileSync(control, 'utf8'))[op] ?? null;
    } catch {
      return null;
    }
  };
  const check = (op, path) => {
    const r = rule(op);
    if (r && path !== undefined && new RegExp(r.name).test(basename(String(path)))) {
      throw Object.assign(new Error(`${r.code}: injected ${op} fault on ${path}`), { code: r.code, syscall: op, path: String(path) });
    }
  };
  fs.openSync = (path, ...rest) => {
    const fd = original.openSync(path, ...rest);
    opened.set(fd, String(path));
    return fd;
  };
  fs.closeSync = (fd) => {
    opened.delete(fd);
    return original.closeSync(fd);
  };
  fs.writeSync = (fd, ...rest) => {
    check('write', opened.get(fd));
    return original.writeSync(fd, ...rest);
  };
  fs.renameSync = (from, to) => {
    check('rename', to);
    return original.renameSync(from, to);
  };
  const promises = require('node:fs/promises');
  const originalOpen = promises.open;
  const originalRename = promises.rename;
  promises.open = async (path, ...rest) => {
    const handle = await originalOpen(path, ...rest);
    const { write, writeFile } = handle;
    handle.write = (...args) => {
      check('write', path);
      return write.apply(handle, args);
    };
    handle.writeFile = (...args) => {
      check('write', path);
      return writeFile.apply(handle, args);
    };
    return handle;
  };
  promises.rename = (from, to) => {
    check('rename', to);
    return originalRename(from, to);
  };
  syncBuiltinESMExports();
}
