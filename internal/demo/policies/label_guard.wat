;; The demo's WASM policy, in toolgate's guest ABI (docs/wasm-abi.md): it
;; denies a call whose input document contains the bytes "CONFIDENTIAL"
;; anywhere, and allows every other call. Input goes at 1024 (one call at a
;; time per instance); decisions are constants in a data segment.
;; Rebuild: wat2wasm label_guard.wat -o label_guard.wasm (make wasm-fixtures).
(module
  (memory (export "memory") 1)
  (data (i32.const 16) "CONFIDENTIAL")                     ;; 12 bytes
  (data (i32.const 32) "{}")                               ;; 2 bytes
  (data (i32.const 48) "{\"deny\":[{\"msg\":\"notes marked CONFIDENTIAL stay out of the shared notebook\",\"path\":\"\"}]}") ;; 88 bytes
  (func (export "toolgate_abi_version") (result i32) (i32.const 1))
  ;; toolgate_alloc(len) -> ptr: input always goes at 1024, growing
  ;; memory when it does not fit; 0 when memory cannot grow.
  (func (export "toolgate_alloc") (param $n i32) (result i32)
    (local $need i32)
    (local.set $need (i32.sub
      (i32.shr_u (i32.add (i32.add (local.get $n) (i32.const 1024)) (i32.const 65535)) (i32.const 16))
      (memory.size)))
    (if (i32.gt_s (local.get $need) (i32.const 0))
      (then (if (i32.eq (memory.grow (local.get $need)) (i32.const -1))
        (then (return (i32.const 0))))))
    (i32.const 1024))
  ;; toolgate_validate(ptr, len) -> (ptr << 32) | len of the decision.
  (func (export "toolgate_validate") (param $p i32) (param $n i32) (result i64)
    (local $i i32) (local $j i32) (local $end i32)
    (local.set $end (i32.sub (i32.add (local.get $p) (local.get $n)) (i32.const 12)))
    (local.set $i (local.get $p))
    (block $done
      (loop $scan
        (br_if $done (i32.gt_s (local.get $i) (local.get $end)))
        (local.set $j (i32.const 0))
        (block $miss
          (loop $cmp
            (br_if $miss (i32.ne
              (i32.load8_u (i32.add (local.get $i) (local.get $j)))
              (i32.load8_u (i32.add (i32.const 16) (local.get $j)))))
            (local.set $j (i32.add (local.get $j) (i32.const 1)))
            (br_if $cmp (i32.lt_u (local.get $j) (i32.const 12))))
          (return (i64.or (i64.shl (i64.const 48) (i64.const 32)) (i64.const 88))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $scan)))
    (i64.or (i64.shl (i64.const 32) (i64.const 32)) (i64.const 2))))
