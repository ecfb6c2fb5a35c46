;; Hostile: toolgate_validate grows memory a page at a time and writes into
;; each new page, so the memory is really used; when a grow fails it asks
;; again, forever, as an allocator that retries would.
(module
  (memory (export "memory") 1)
  (func (export "toolgate_abi_version") (result i32) (i32.const 1))
  (func (export "toolgate_alloc") (param i32) (result i32) (i32.const 1024))
  (func (export "toolgate_validate") (param i32 i32) (result i64)
    (local $old i32)
    (loop $grow
      (local.set $old (memory.grow (i32.const 1)))
      (if (i32.ne (local.get $old) (i32.const -1))
        (then (i32.store8 (i32.mul (local.get $old) (i32.const 65536)) (i32.const 1))))
      (br $grow))
    (i64.const 0)))
