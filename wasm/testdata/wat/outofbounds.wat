;; Hostile: toolgate_validate returns a pointer and length past the end
;; of its memory.
(module
  (memory (export "memory") 1)
  (func (export "toolgate_abi_version") (result i32) (i32.const 1))
  (func (export "toolgate_alloc") (param i32) (result i32) (i32.const 1024))
  (func (export "toolgate_validate") (param i32 i32) (result i64)
    (i64.const 0xfffffff000001000)))
