// RUN: smalti-translate %s --split-input-file --to=ptx | grep -v '^[[:space:]]*\.loc ' | filecheck %s
// Non-splat vector constants (smalti/lowering/constants.py), in whatever layout inference
// gives them: registers that hold the same value in every thread are movs; otherwise the
// module carries the elements as a read-only global table that each thread loads its part
// of, exactly as a vector_load of that buffer.

// The table: row-major elements as bytes (little-endian i32 0, 1, 2, ...), loaded with the
// layout's widest accesses (strided<vec = 4>: one ld.global.v4.b32 per thread).
// CHECK: .global .align 16 .b8 __smalti_table_constant_0[2048] = {{[{]}}0, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3,
// CHECK-LABEL: .visible .entry table(
// CHECK: mov.u64 [[BASE:%rd[0-9]+]], __smalti_table_constant_0;
// CHECK: add.s64 [[AT:%rd[0-9]+]], [[BASE]], {{%rd[0-9]+}};
// CHECK-NEXT: ld.global.v4.b32 {{.*}}, [[[AT]]];
func.func @table(%out: memref<512xi32>) attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %v = arith.constant dense<[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65, 66, 67, 68, 69, 70, 71, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 83, 84, 85, 86, 87, 88, 89, 90, 91, 92, 93, 94, 95, 96, 97, 98, 99, 100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111, 112, 113, 114, 115, 116, 117, 118, 119, 120, 121, 122, 123, 124, 125, 126, 127, 128, 129, 130, 131, 132, 133, 134, 135, 136, 137, 138, 139, 140, 141, 142, 143, 144, 145, 146, 147, 148, 149, 150, 151, 152, 153, 154, 155, 156, 157, 158, 159, 160, 161, 162, 163, 164, 165, 166, 167, 168, 169, 170, 171, 172, 173, 174, 175, 176, 177, 178, 179, 180, 181, 182, 183, 184, 185, 186, 187, 188, 189, 190, 191, 192, 193, 194, 195, 196, 197, 198, 199, 200, 201, 202, 203, 204, 205, 206, 207, 208, 209, 210, 211, 212, 213, 214, 215, 216, 217, 218, 219, 220, 221, 222, 223, 224, 225, 226, 227, 228, 229, 230, 231, 232, 233, 234, 235, 236, 237, 238, 239, 240, 241, 242, 243, 244, 245, 246, 247, 248, 249, 250, 251, 252, 253, 254, 255, 256, 257, 258, 259, 260, 261, 262, 263, 264, 265, 266, 267, 268, 269, 270, 271, 272, 273, 274, 275, 276, 277, 278, 279, 280, 281, 282, 283, 284, 285, 286, 287, 288, 289, 290, 291, 292, 293, 294, 295, 296, 297, 298, 299, 300, 301, 302, 303, 304, 305, 306, 307, 308, 309, 310, 311, 312, 313, 314, 315, 316, 317, 318, 319, 320, 321, 322, 323, 324, 325, 326, 327, 328, 329, 330, 331, 332, 333, 334, 335, 336, 337, 338, 339, 340, 341, 342, 343, 344, 345, 346, 347, 348, 349, 350, 351, 352, 353, 354, 355, 356, 357, 358, 359, 360, 361, 362, 363, 364, 365, 366, 367, 368, 369, 370, 371, 372, 373, 374, 375, 376, 377, 378, 379, 380, 381, 382, 383, 384, 385, 386, 387, 388, 389, 390, 391, 392, 393, 394, 395, 396, 397, 398, 399, 400, 401, 402, 403, 404, 405, 406, 407, 408, 409, 410, 411, 412, 413, 414, 415, 416, 417, 418, 419, 420, 421, 422, 423, 424, 425, 426, 427, 428, 429, 430, 431, 432, 433, 434, 435, 436, 437, 438, 439, 440, 441, 442, 443, 444, 445, 446, 447, 448, 449, 450, 451, 452, 453, 454, 455, 456, 457, 458, 459, 460, 461, 462, 463, 464, 465, 466, 467, 468, 469, 470, 471, 472, 473, 474, 475, 476, 477, 478, 479, 480, 481, 482, 483, 484, 485, 486, 487, 488, 489, 490, 491, 492, 493, 494, 495, 496, 497, 498, 499, 500, 501, 502, 503, 504, 505, 506, 507, 508, 509, 510, 511]> : vector<512xi32>
  "smalti.vector_store"(%v, %out, %c0) : (vector<512xi32>, memref<512xi32>, index) -> ()
  return
}

// -----

// Every thread holds 1.5, -2.0, 3.0, 4.0 in its four registers: four movs, no table.
// CHECK-LABEL: .visible .entry movs(
// CHECK-NOT: constant_0
// CHECK: mov.b32 [[A:%f[0-9]+]], 1069547520;
// CHECK-NEXT: mov.b32 [[B:%f[0-9]+]], 3221225472;
// CHECK-NEXT: mov.b32 [[C:%f[0-9]+]], 1077936128;
// CHECK-NEXT: mov.b32 [[D:%f[0-9]+]], 1082130432;
// CHECK: st.global.v4.f32 [{{%rd[0-9]+}}], {[[A]], [[B]], [[C]], [[D]]};
func.func @movs(%out: memref<512xf32>) attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %v = arith.constant dense<[1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0, 1.5, -2.0, 3.0, 4.0]> : vector<512xf32>
  "smalti.vector_store"(%v, %out, %c0) : (vector<512xf32>, memref<512xf32>, index) -> ()
  return
}

// -----

// An i1 table holds bytes, loaded as i1 vectors are (each byte tested against zero).
// CHECK: .global .align 16 .b8 __smalti_mask_constant_0[256] = {{[{]}}1, 0, 0, 1, 0, 0, 1,
// CHECK-LABEL: .visible .entry mask(
// CHECK: ld.global.b16 [[U:%rs[0-9]+]],
// CHECK-NEXT: and.b16 [[LOW:%rs[0-9]+]], [[U]], 255;
// CHECK-NEXT: setp.ne.b16 {{%p[0-9]+}}, [[LOW]], 0;
func.func @mask(%a: memref<256xf32>) attributes {smalti.kernel, smalti.grid = array<i64: 1>} {
  %c0 = arith.constant 0 : index
  %m = arith.constant dense<[true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true, false, false, true]> : vector<256xi1>
  %x = "smalti.vector_load"(%a, %c0) : (memref<256xf32>, index) -> vector<256xf32>
  %z = arith.constant dense<0.0> : vector<256xf32>
  %r = arith.select %m, %x, %z : vector<256xi1>, vector<256xf32>
  "smalti.vector_store"(%r, %a, %c0) : (vector<256xf32>, memref<256xf32>, index) -> ()
  return
}
