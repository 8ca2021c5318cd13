// RUN: MONET_ROUNDTRIP
// RUN: MONET_GENERIC_ROUNDTRIP

func.func @mlp(%x: tensor<4x784xf32> {monet.input = "x"}, %w: tensor<256x784xf32> {monet.param = "fc1.weight", monet.trainable}, %b: tensor<256xf32> {monet.param = "fc1.bias", monet.trainable}) -> tensor<4x256xf32> {
  %h = nn.gemm %x, %w, %b {trans_b = true, node = "/fc1/Gemm"} : (tensor<4x784xf32>, tensor<256x784xf32>, tensor<256xf32>) -> tensor<4x256xf32>
  %r = nn.relu %h {node = "/Relu"} : tensor<4x256xf32>
  func.return %r : tensor<4x256xf32>
}

// CHECK-LABEL: func.func @mlp
// CHECK-SAME:    %x: tensor<4x784xf32> {monet.input = "x"}
// CHECK-SAME:    {monet.param = "fc1.weight", monet.trainable}
// CHECK:         %h = nn.gemm %x, %w, %b {trans_b = true, node = "/fc1/Gemm"} : (tensor<4x784xf32>, tensor<256x784xf32>, tensor<256xf32>) -> tensor<4x256xf32>
// CHECK-NEXT:    %r = nn.relu %h {node = "/Relu"} : tensor<4x256xf32>

// CHECK-GENERIC: "nn.gemm"(%x, %w, %b) <{trans_b = true, node = "/fc1/Gemm"}> : (tensor<4x784xf32>, tensor<256x784xf32>, tensor<256xf32>) -> tensor<4x256xf32>
// CHECK-GENERIC: "nn.relu"(%h) <{node = "/Relu"}> : (tensor<4x256xf32>) -> tensor<4x256xf32>

func.func @cnn(%x: tensor<1x3x32x32xf32>, %w: tensor<8x3x3x3xf32>, %dw: tensor<8x1x3x3xf32>, %g: tensor<8xf32>, %bb: tensor<8xf32>, %m: tensor<8xf32>, %v: tensor<8xf32>) -> tensor<1x8xf32> {
  %c = nn.conv %x, %w {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>} : (tensor<1x3x32x32xf32>, tensor<8x3x3x3xf32>) -> tensor<1x8x16x16xf32>
  %d = nn.conv %c, %dw {pads = array<i64: 1, 1, 1, 1>, group = 8 : i64} : (tensor<1x8x16x16xf32>, tensor<8x1x3x3xf32>) -> tensor<1x8x16x16xf32>
  %n = nn.batch_norm %d, %g, %bb, %m, %v {epsilon = 1.000000e-05 : f64, training = true} : (tensor<1x8x16x16xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<1x8x16x16xf32>
  %p = nn.max_pool %n {kernel_shape = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>} : (tensor<1x8x16x16xf32>) -> tensor<1x8x8x8xf32>
  %a = nn.avg_pool %p {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, count_include_pad = true} : (tensor<1x8x8x8xf32>) -> tensor<1x8x4x4xf32>
  %gp = nn.global_avg_pool %a : (tensor<1x8x4x4xf32>) -> tensor<1x8x1x1xf32>
  %f = nn.reshape %gp : (tensor<1x8x1x1xf32>) -> tensor<1x8xf32>
  %hs = nn.hard_swish %f : tensor<1x8xf32>
  %cl = nn.clip %hs {min = 0.000000e+00 : f64, max = 6.000000e+00 : f64} : tensor<1x8xf32>
  func.return %cl : tensor<1x8xf32>
}

// CHECK-LABEL: func.func @cnn
// CHECK:       nn.conv %x, %w {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>}
// CHECK:       nn.conv %c, %dw {pads = array<i64: 1, 1, 1, 1>, group = 8 : i64}
// CHECK:       nn.batch_norm %d, %g, %bb, %m, %v {epsilon = 1.000000e-05 : f64, training = true}
// CHECK:       nn.max_pool %n {kernel_shape = array<i64: 3, 3>
// CHECK:       nn.avg_pool %p {{.*}}count_include_pad = true
// CHECK:       nn.global_avg_pool %a : (tensor<1x8x4x4xf32>) -> tensor<1x8x1x1xf32>
// CHECK:       nn.reshape %gp
// CHECK:       nn.hard_swish %f : tensor<1x8xf32>
// CHECK:       nn.clip %hs {min = 0.000000e+00 : f64, max = 6.000000e+00 : f64}

func.func @attention(%q: tensor<1x4x8x16xf32>, %k: tensor<1x4x8x16xf32>, %ids: tensor<1x8xi64>, %wte: tensor<32x64xf32>, %ln_g: tensor<64xf32>, %ln_b: tensor<64xf32>) -> (tensor<1x4x8x8xf32>, tensor<1x8x64xf32>) {
  %kt = nn.transpose %k {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x4x8x16xf32>) -> tensor<1x4x16x8xf32>
  %s = nn.matmul %q, %kt : (tensor<1x4x8x16xf32>, tensor<1x4x16x8xf32>) -> tensor<1x4x8x8xf32>
  %scale = nn.constant dense<2.500000e-01> : tensor<f32> {node = "/attn/Constant"}
  %ss = nn.mul %s, %scale : (tensor<1x4x8x8xf32>, tensor<f32>) -> tensor<1x4x8x8xf32>
  %ninf = nn.constant dense<"0x000080FF"> : tensor<f32>
  %mask = nn.constant dense<[[true, false, false, false, false, false, false, false], [true, true, false, false, false, false, false, false], [true, true, true, false, false, false, false, false], [true, true, true, true, false, false, false, false], [true, true, true, true, true, false, false, false], [true, true, true, true, true, true, false, false], [true, true, true, true, true, true, true, false], [true, true, true, true, true, true, true, true]]> : tensor<8x8xi1>
  %w = nn.where %mask, %ss, %ninf : (tensor<8x8xi1>, tensor<1x4x8x8xf32>, tensor<f32>) -> tensor<1x4x8x8xf32>
  %p = nn.softmax %w {axis = -1 : i64} : tensor<1x4x8x8xf32>
  %e = nn.gather %wte, %ids {axis = 0 : i64} : (tensor<32x64xf32>, tensor<1x8xi64>) -> tensor<1x8x64xf32>
  %l = nn.layer_norm %e, %ln_g, %ln_b {axis = -1 : i64, epsilon = 1.000000e-05 : f64} : (tensor<1x8x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<1x8x64xf32>
  %a, %b2 = nn.split %l {axis = 2 : i64} : (tensor<1x8x64xf32>) -> (tensor<1x8x16xf32>, tensor<1x8x48xf32>)
  %cat = nn.concat %b2, %a {axis = 2 : i64} : (tensor<1x8x48xf32>, tensor<1x8x16xf32>) -> tensor<1x8x64xf32>
  %sum = nn.sum %cat, %l, %e : (tensor<1x8x64xf32>, tensor<1x8x64xf32>, tensor<1x8x64xf32>) -> tensor<1x8x64xf32>
  func.return %p, %sum : tensor<1x4x8x8xf32>, tensor<1x8x64xf32>
}

// CHECK-LABEL: func.func @attention
// CHECK:       nn.transpose %k {perm = array<i64: 0, 1, 3, 2>}
// CHECK:       nn.matmul %q, %kt
// CHECK:       nn.constant dense<2.500000e-01> : tensor<f32> {node = "/attn/Constant"}
// CHECK:       nn.constant dense<"0x000080FF"> : tensor<f32>
// CHECK:       nn.constant dense<"0xFF000000
// CHECK-SAME:  : tensor<8x8xi1>
// CHECK:       nn.where %mask, %ss, %ninf
// CHECK:       nn.softmax %w {axis = -1 : i64} : tensor<1x4x8x8xf32>
// CHECK:       nn.gather %wte, %ids {axis = 0 : i64}
// CHECK:       nn.layer_norm %e, %ln_g, %ln_b {axis = -1 : i64, epsilon = 1.000000e-05 : f64}
// CHECK:       %a, %b2 = nn.split %l {axis = 2 : i64} : (tensor<1x8x64xf32>) -> (tensor<1x8x16xf32>, tensor<1x8x48xf32>)
// CHECK:       nn.concat %b2, %a {axis = 2 : i64}
// CHECK:       nn.sum %cat, %l, %e

// CHECK-GENERIC: "nn.constant"() <{value = #nn.data<tensor<f32>, "0x000080FF">}> : () -> tensor<f32>

func.func @misc(%x: tensor<2x8xf32>, %y: tensor<2x1xf32>, %ids: tensor<2xi64>, %labels: tensor<2xi64>) -> (tensor<f32>, tensor<f32>, tensor<2x8xi1>) {
  %d = nn.div %x, %y : (tensor<2x8xf32>, tensor<2x1xf32>) -> tensor<2x8xf32>
  %two = nn.constant dense<2.000000e+00> : tensor<f32>
  %p = nn.pow %d, %two : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %sl = nn.slice %p {starts = array<i64: 0>, ends = array<i64: 4>, axes = array<i64: 1>, steps = array<i64: 1>} : (tensor<2x8xf32>) -> tensor<2x4xf32>
  %pd = nn.pad %sl {pads = array<i64: 0, 2, 0, 2>, mode = "constant"} : (tensor<2x4xf32>) -> tensor<2x8xf32>
  %ex = nn.expand %y : (tensor<2x1xf32>) -> tensor<2x8xf32>
  %eq = nn.equal %pd, %ex : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xi1>
  %nt = nn.not %eq : tensor<2x8xi1>
  %cast = nn.cast %nt : (tensor<2x8xi1>) -> tensor<2x8xf32>
  %dr, %mask = nn.dropout %cast {ratio = 1.000000e-01 : f64, seed = 0 : i64} : (tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2x8xi1>)
  %rs = nn.reduce_sum %dr {axes = array<i64: 1>, keepdims = false} : (tensor<2x8xf32>) -> tensor<2xf32>
  %rm = nn.reduce_mean %rs : (tensor<2xf32>) -> tensor<1xf32>
  %loss = nn.softmax_cross_entropy %x, %labels {reduction = "mean"} : (tensor<2x8xf32>, tensor<2xi64>) -> tensor<f32>
  %mse = nn.mse_loss %x, %d {reduction = "sum"} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<f32>
  func.return %loss, %mse, %mask : tensor<f32>, tensor<f32>, tensor<2x8xi1>
}

// CHECK-LABEL: func.func @misc
// CHECK:       nn.div %x, %y
// CHECK:       nn.pow %d, %two
// CHECK:       nn.slice %p {starts = array<i64: 0>, ends = array<i64: 4>, axes = array<i64: 1>, steps = array<i64: 1>}
// CHECK:       nn.pad %sl {pads = array<i64: 0, 2, 0, 2>, mode = "constant"}
// CHECK:       nn.expand %y
// CHECK:       nn.equal %pd, %ex
// CHECK:       nn.not %eq : tensor<2x8xi1>
// CHECK:       nn.cast %nt : (tensor<2x8xi1>) -> tensor<2x8xf32>
// CHECK:       %dr, %mask = nn.dropout %cast {ratio = 1.000000e-01 : f64, seed = 0 : i64}
// CHECK:       nn.reduce_sum %dr {axes = array<i64: 1>, keepdims = false}
// CHECK:       nn.reduce_mean %rs
// CHECK:       nn.softmax_cross_entropy %x, %labels {reduction = "mean"} : (tensor<2x8xf32>, tensor<2xi64>) -> tensor<f32>
// CHECK:       nn.mse_loss %x, %d {reduction = "sum"}

func.func @random_masks(%x: tensor<2x16xf32>, %ids: tensor<2x16xi64>, %buf: tensor<1x32xi64>) -> (tensor<2x16xf32>, tensor<2x16xi64>, tensor<2x16xi1>) {
  %r = nn.random {distribution = "uniform", low = 0.000000e+00 : f64, high = 1.000000e+00 : f64, seed = 3 : i64} : tensor<2x16xf32>
  %n = nn.random {distribution = "normal", mean = 0.000000e+00 : f64, scale = 2.000000e+00 : f64} : tensor<2x16xf32>
  %p = nn.constant dense<8.000000e-01> : tensor<f32>
  %keep = nn.less %r, %p : (tensor<2x16xf32>, tensor<f32>) -> tensor<2x16xi1>
  %big = nn.greater %n, %x : (tensor<2x16xf32>, tensor<2x16xf32>) -> tensor<2x16xi1>
  %le = nn.less %r, %p {or_equal = true} : (tensor<2x16xf32>, tensor<f32>) -> tensor<2x16xi1>
  %ge = nn.greater %n, %x {or_equal = true} : (tensor<2x16xf32>, tensor<2x16xf32>) -> tensor<2x16xi1>
  %pos = nn.cumsum %ids {axis = 1 : i64, exclusive = true, reverse = true} : (tensor<2x16xi64>) -> tensor<2x16xi64>
  %tok = nn.gather_elements %buf, %pos {axis = 1 : i64} : (tensor<1x32xi64>, tensor<2x16xi64>) -> tensor<2x16xi64>
  %m = nn.cast %keep : (tensor<2x16xi1>) -> tensor<2x16xf32>
  %y = nn.mul %x, %m : (tensor<2x16xf32>, tensor<2x16xf32>) -> tensor<2x16xf32>
  func.return %y, %tok, %big : tensor<2x16xf32>, tensor<2x16xi64>, tensor<2x16xi1>
}

// CHECK-LABEL: func.func @random_masks
// CHECK:       nn.random {distribution = "uniform", low = 0.000000e+00 : f64, high = 1.000000e+00 : f64, seed = 3 : i64} : tensor<2x16xf32>
// CHECK:       nn.random {distribution = "normal", mean = 0.000000e+00 : f64, scale = 2.000000e+00 : f64} : tensor<2x16xf32>
// CHECK:       nn.less %r, %p : (tensor<2x16xf32>, tensor<f32>) -> tensor<2x16xi1>
// CHECK:       nn.greater %n, %x
// CHECK:       nn.less %r, %p {or_equal = true} : (tensor<2x16xf32>, tensor<f32>) -> tensor<2x16xi1>
// CHECK:       nn.greater %n, %x {or_equal = true}
// CHECK:       nn.cumsum %ids {axis = 1 : i64, exclusive = true, reverse = true}
// CHECK:       nn.gather_elements %buf, %pos {axis = 1 : i64} : (tensor<1x32xi64>, tensor<2x16xi64>) -> tensor<2x16xi64>

func.func @upsample(%x: tensor<2x8x4x4xf32>) -> (tensor<2x8x16x16xf32>, tensor<2x8x8x8xf32>) {
  %u = nn.resize %x {mode = "linear", coordinate_transformation_mode = "half_pixel"} : (tensor<2x8x4x4xf32>) -> tensor<2x8x16x16xf32>
  %n = nn.resize %x {mode = "nearest", coordinate_transformation_mode = "asymmetric", nearest_mode = "floor"} : (tensor<2x8x4x4xf32>) -> tensor<2x8x8x8xf32>
  func.return %u, %n : tensor<2x8x16x16xf32>, tensor<2x8x8x8xf32>
}

// CHECK-LABEL: func.func @upsample
// CHECK:       nn.resize %x {mode = "linear", coordinate_transformation_mode = "half_pixel"} : (tensor<2x8x4x4xf32>) -> tensor<2x8x16x16xf32>
// CHECK:       nn.resize %x {mode = "nearest", coordinate_transformation_mode = "asymmetric", nearest_mode = "floor"}

func.func @scatter_gather(%table: tensor<49x4xf32>, %idx: tensor<6x1xi64>, %fill: tensor<6x4xf32>) -> (tensor<6x4xf32>, tensor<49x4xf32>) {
  %b = nn.gather_nd %table, %idx : (tensor<49x4xf32>, tensor<6x1xi64>) -> tensor<6x4xf32>
  %m = nn.scatter_nd %table, %idx, %fill {reduction = "add"} : (tensor<49x4xf32>, tensor<6x1xi64>, tensor<6x4xf32>) -> tensor<49x4xf32>
  func.return %b, %m : tensor<6x4xf32>, tensor<49x4xf32>
}

// CHECK-LABEL: func.func @scatter_gather
// CHECK:       nn.gather_nd %table, %idx : (tensor<49x4xf32>, tensor<6x1xi64>) -> tensor<6x4xf32>
// CHECK:       nn.scatter_nd %table, %idx, %fill {reduction = "add"}

func.func @activations(%x: tensor<2x8xf32>, %s: tensor<8xf32>, %i: tensor<2x8xi64>, %m: tensor<2x8xi1>) -> (tensor<2x8xf32>, tensor<2x8xi64>, tensor<2x8xi1>) {
  %a = nn.softplus %x : tensor<2x8xf32>
  %b = nn.softsign %a : tensor<2x8xf32>
  %c = nn.abs %b : tensor<2x8xf32>
  %d = nn.sign %c : tensor<2x8xf32>
  %e = nn.sin %d : tensor<2x8xf32>
  %f = nn.cos %e : tensor<2x8xf32>
  %g = nn.floor %f : tensor<2x8xf32>
  %h = nn.ceil %g : tensor<2x8xf32>
  %r = nn.round %h : tensor<2x8xf32>
  %el = nn.elu %r {alpha = 1.000000e+00 : f64} : tensor<2x8xf32>
  %ce = nn.celu %el {alpha = 2.000000e+00 : f64} : tensor<2x8xf32>
  %se = nn.selu %ce : tensor<2x8xf32>
  %mi = nn.mish %se : tensor<2x8xf32>
  %mx = nn.max %mi, %s : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %mn = nn.min %mx, %s : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %pr = nn.prelu %mn, %s : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %md = nn.mod %i, %i {fmod = true} : (tensor<2x8xi64>, tensor<2x8xi64>) -> tensor<2x8xi64>
  %o = nn.or %m, %m : (tensor<2x8xi1>, tensor<2x8xi1>) -> tensor<2x8xi1>
  %xo = nn.xor %o, %m : (tensor<2x8xi1>, tensor<2x8xi1>) -> tensor<2x8xi1>
  func.return %pr, %md, %xo : tensor<2x8xf32>, tensor<2x8xi64>, tensor<2x8xi1>
}

// CHECK-LABEL: func.func @activations
// CHECK:       nn.softplus %x : tensor<2x8xf32>
// CHECK:       nn.softsign
// CHECK:       nn.abs
// CHECK:       nn.sign
// CHECK:       nn.sin
// CHECK:       nn.cos
// CHECK:       nn.floor
// CHECK:       nn.ceil
// CHECK:       nn.round
// CHECK:       nn.elu %r {alpha = 1.000000e+00 : f64} : tensor<2x8xf32>
// CHECK:       nn.celu %el {alpha = 2.000000e+00 : f64}
// CHECK:       nn.selu %ce : tensor<2x8xf32>
// CHECK:       nn.mish
// CHECK:       nn.max %mi, %s : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
// CHECK:       nn.min %mx, %s
// CHECK:       nn.prelu %mn, %s
// CHECK:       nn.mod %i, %i {fmod = true}
// CHECK:       nn.or %m, %m
// CHECK:       nn.xor %o, %m

func.func @routing(%p: tensor<16x8xf32>, %h: tensor<16x4xf32>) -> (tensor<16x2xf32>, tensor<16x4xf32>, tensor<2x4xf32>, tensor<16xi64>, tensor<32x4xf32>) {
  %w, %e = nn.topk %p {k = 2 : i64, axis = -1 : i64} : (tensor<16x8xf32>) -> (tensor<16x2xf32>, tensor<16x2xi64>)
  %oh = nn.one_hot %e {depth = 8 : i64, axis = -1 : i64, off_value = 0.000000e+00 : f64, on_value = 1.000000e+00 : f64} : (tensor<16x2xi64>) -> tensor<16x2x8xi64>
  %hit = nn.reduce_max %oh {axes = array<i64: 1>, keepdims = false} : (tensor<16x2x8xi64>) -> tensor<16x8xi64>
  %lo = nn.reduce_min %h {axes = array<i64: 0>} : (tensor<16x4xf32>) -> tensor<1x4xf32>
  %mask = nn.argmax %hit {axis = 1 : i64, keepdims = false} : (tensor<16x8xi64>) -> tensor<16xi64>
  %am = nn.argmin %h {axis = 1 : i64, keepdims = false, select_last_index = true} : (tensor<16x4xf32>) -> tensor<16xi64>
  %nz = nn.nonzero %mask : (tensor<16xi64>) -> tensor<1x4xi64>
  %rows = nn.reshape %nz : (tensor<1x4xi64>) -> tensor<4xi64>
  %picked = nn.gather %h, %rows {axis = 0 : i64} : (tensor<16x4xf32>, tensor<4xi64>) -> tensor<4x4xf32>
  %idx = nn.tile %nz {repeats = array<i64: 4, 1>} : (tensor<1x4xi64>) -> tensor<4x4xi64>
  %sc = nn.scatter_elements %h, %idx, %picked {axis = 0 : i64, reduction = "add"} : (tensor<16x4xf32>, tensor<4x4xi64>, tensor<4x4xf32>) -> tensor<16x4xf32>
  %two = nn.tile %lo {repeats = array<i64: 2, 1>} : (tensor<1x4xf32>) -> tensor<2x4xf32>
  %big = nn.tile %h {repeats = array<i64: 2, 1>} : (tensor<16x4xf32>) -> tensor<32x4xf32>
  func.return %w, %sc, %two, %am, %big : tensor<16x2xf32>, tensor<16x4xf32>, tensor<2x4xf32>, tensor<16xi64>, tensor<32x4xf32>
}

// CHECK-LABEL: func.func @routing
// CHECK:       %w, %e = nn.topk %p {k = 2 : i64, axis = -1 : i64} : (tensor<16x8xf32>) -> (tensor<16x2xf32>, tensor<16x2xi64>)
// CHECK:       nn.one_hot %e {depth = 8 : i64, axis = -1 : i64, off_value = 0.000000e+00 : f64, on_value = 1.000000e+00 : f64}
// CHECK:       nn.reduce_max %oh {axes = array<i64: 1>, keepdims = false}
// CHECK:       nn.reduce_min %h {axes = array<i64: 0>}
// CHECK:       nn.argmax %hit {axis = 1 : i64, keepdims = false} : (tensor<16x8xi64>) -> tensor<16xi64>
// CHECK:       nn.argmin %h {axis = 1 : i64, keepdims = false, select_last_index = true}
// CHECK:       nn.nonzero %mask : (tensor<16xi64>) -> tensor<1x4xi64>
// CHECK:       nn.tile %nz {repeats = array<i64: 4, 1>}
// CHECK:       nn.scatter_elements %h, %idx, %picked {axis = 0 : i64, reduction = "add"}

func.func @cubic(%x: tensor<1x3x37x37xf32>) -> tensor<1x3x32x32xf32> {
  %u = nn.resize %x {mode = "cubic", coordinate_transformation_mode = "half_pixel", cubic_coeff_a = -7.500000e-01 : f64, exclude_outside = true, scales = array<f64: 1.0, 1.0, 0.8648648648648649, 0.8648648648648649>} : (tensor<1x3x37x37xf32>) -> tensor<1x3x32x32xf32>
  func.return %u : tensor<1x3x32x32xf32>
}

// CHECK-LABEL: func.func @cubic
// CHECK:       nn.resize %x {mode = "cubic", coordinate_transformation_mode = "half_pixel", cubic_coeff_a = -7.500000e-01 : f64, exclude_outside = true, scales = array<f64: 1.000000e+00, 1.000000e+00, 0.86486486486486491, 0.86486486486486491>}
