;; Hostile: toolgate_validate grows memory a page at a time until the host
;; refuses, then traps as an allocator that cannot allocate would.
(module
  (memory (export "memory") 1)
  (func (export "toolgate_abi_version") (result i32) (i32.const 1))
  (func (export "toolgate_alloc") (param i32) (result i32) (i32.const 1024))
  (func (export "toolgate_validate") (param i32 i32) (result i64)
    (loop $grow
      (br_if $grow (i32.ne (memory.grow (i32.const 1)) (i32.const -1))))
    unreachable))
