// RUN: MONET_ROUNDTRIP
// RUN: MONET_GENERIC_ROUNDTRIP

func.func @backward(%dy: tensor<4x64x8x8xf32>, %x: tensor<4x64x8x8xf32>, %w: tensor<64x64x3x3xf32>, %g: tensor<64xf32>) -> (tensor<4x64x8x8xf32>, tensor<64x64x3x3xf32>, tensor<64xf32>, tensor<4x64x8x8xf32>, tensor<64xf32>) {
  %r = grad.relu %dy, %x {node = "/Relu"} : tensor<4x64x8x8xf32>
  %dx = grad.conv_input %r, %w {pads = array<i64: 1, 1, 1, 1>, node = "/conv/Conv"} : (tensor<4x64x8x8xf32>, tensor<64x64x3x3xf32>) -> tensor<4x64x8x8xf32>
  %dw = grad.conv_weight %r, %x {pads = array<i64: 1, 1, 1, 1>, node = "/conv/Conv"} : (tensor<4x64x8x8xf32>, tensor<4x64x8x8xf32>) -> tensor<64x64x3x3xf32>
  %db = grad.conv_bias %r {node = "/conv/Conv"} : (tensor<4x64x8x8xf32>) -> tensor<64xf32>
  %bx, %bg, %bb = grad.batch_norm %dx, %x, %g {epsilon = 1.000000e-05 : f64} : (tensor<4x64x8x8xf32>, tensor<4x64x8x8xf32>, tensor<64xf32>) -> (tensor<4x64x8x8xf32>, tensor<64xf32>, tensor<64xf32>)
  func.return %bx, %dw, %db, %r, %bg : tensor<4x64x8x8xf32>, tensor<64x64x3x3xf32>, tensor<64xf32>, tensor<4x64x8x8xf32>, tensor<64xf32>
}

// CHECK-LABEL: func.func @backward
// CHECK:       %r = grad.relu %dy, %x {node = "/Relu"} : tensor<4x64x8x8xf32>
// CHECK:       grad.conv_input %r, %w {pads = array<i64: 1, 1, 1, 1>, node = "/conv/Conv"} : (tensor<4x64x8x8xf32>, tensor<64x64x3x3xf32>) -> tensor<4x64x8x8xf32>
// CHECK:       grad.conv_weight %r, %x {pads = array<i64: 1, 1, 1, 1>, node = "/conv/Conv"}
// CHECK:       grad.conv_bias %r
// CHECK:       %bx, %bg, %bb = grad.batch_norm %dx, %x, %g {epsilon = 1.000000e-05 : f64}
// CHECK-GENERIC: "grad.conv_weight"(%r, %x) <{pads = array<i64: 1, 1, 1, 1>, node = "/conv/Conv"}>

func.func @transformer(%dy: tensor<1x8x64xf32>, %x: tensor<1x8x64xf32>, %g: tensor<64xf32>, %w: tensor<64x64xf32>, %ids: tensor<1x8xi64>, %p: tensor<1x4x8x8xf32>, %dp: tensor<1x4x8x8xf32>) -> (tensor<1x8x64xf32>, tensor<64x64xf32>, tensor<32x64xf32>, tensor<1x4x8x8xf32>, tensor<64xf32>) {
  %lx, %lg, %lb = grad.layer_norm %dy, %x, %g {axis = -1 : i64, epsilon = 1.000000e-05 : f64} : (tensor<1x8x64xf32>, tensor<1x8x64xf32>, tensor<64xf32>) -> (tensor<1x8x64xf32>, tensor<64xf32>, tensor<64xf32>)
  %da = grad.matmul_lhs %lx, %w {trans_b = true} : (tensor<1x8x64xf32>, tensor<64x64xf32>) -> tensor<1x8x64xf32>
  %dw = grad.matmul_rhs %lx, %x {trans_b = true} : (tensor<1x8x64xf32>, tensor<1x8x64xf32>) -> tensor<64x64xf32>
  %ge = grad.gelu %da, %x {approximate = "tanh"} : tensor<1x8x64xf32>
  %emb = grad.gather %ge, %ids {axis = 0 : i64} : (tensor<1x8x64xf32>, tensor<1x8xi64>) -> tensor<32x64xf32>
  %ds = grad.softmax %dp, %p {axis = -1 : i64} : tensor<1x4x8x8xf32>
  %ub = grad.unbroadcast %ge : (tensor<1x8x64xf32>) -> tensor<64xf32>
  func.return %ge, %dw, %emb, %ds, %ub : tensor<1x8x64xf32>, tensor<64x64xf32>, tensor<32x64xf32>, tensor<1x4x8x8xf32>, tensor<64xf32>
}

// CHECK-LABEL: func.func @transformer
// CHECK:       grad.layer_norm %dy, %x, %g {axis = -1 : i64, epsilon = 1.000000e-05 : f64}
// CHECK:       grad.matmul_lhs %lx, %w {trans_b = true} : (tensor<1x8x64xf32>, tensor<64x64xf32>) -> tensor<1x8x64xf32>
// CHECK:       grad.matmul_rhs %lx, %x {trans_b = true} : (tensor<1x8x64xf32>, tensor<1x8x64xf32>) -> tensor<64x64xf32>
// CHECK:       grad.gelu %da, %x {approximate = "tanh"} : tensor<1x8x64xf32>
// CHECK:       grad.gather %ge, %ids {axis = 0 : i64}
// CHECK:       grad.softmax %dp, %p {axis = -1 : i64}
// CHECK:       grad.unbroadcast %ge : (tensor<1x8x64xf32>) -> tensor<64xf32>

func.func @pool_and_loss(%dy: tensor<4x6x14x14xf32>, %x: tensor<4x6x28x28xf32>, %dl: tensor<f32>, %lp: tensor<4x10xf32>, %lab: tensor<4xi64>, %mask: tensor<4x6x28x28xi1>) -> (tensor<4x6x28x28xf32>, tensor<4x6x28x28xf32>, tensor<4x10xf32>, tensor<4x6x28x28xf32>) {
  %m = grad.max_pool %dy, %x {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>} : (tensor<4x6x14x14xf32>, tensor<4x6x28x28xf32>) -> tensor<4x6x28x28xf32>
  %a = grad.avg_pool %dy {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>} : (tensor<4x6x14x14xf32>) -> tensor<4x6x28x28xf32>
  %s = grad.softmax_cross_entropy %dl, %lp, %lab {reduction = "mean"} : (tensor<f32>, tensor<4x10xf32>, tensor<4xi64>) -> tensor<4x10xf32>
  %d = grad.dropout %m, %mask {ratio = 1.000000e-01 : f64} : (tensor<4x6x28x28xf32>, tensor<4x6x28x28xi1>) -> tensor<4x6x28x28xf32>
  func.return %m, %a, %s, %d : tensor<4x6x28x28xf32>, tensor<4x6x28x28xf32>, tensor<4x10xf32>, tensor<4x6x28x28xf32>
}

// CHECK-LABEL: func.func @pool_and_loss
// CHECK:       grad.max_pool %dy, %x {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>}
// CHECK:       grad.avg_pool %dy {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>}
// CHECK:       grad.softmax_cross_entropy %dl, %lp, %lab {reduction = "mean"}
// CHECK:       grad.dropout %m, %mask {ratio = 1.000000e-01 : f64}

func.func @loss_classes_last(%dl: tensor<f32>, %lp: tensor<2x16x100xf32>, %lab: tensor<2x16xi64>) -> tensor<2x16x100xf32> {
  %s = grad.softmax_cross_entropy %dl, %lp, %lab {reduction = "mean", class_axis = 2 : i64} : (tensor<f32>, tensor<2x16x100xf32>, tensor<2x16xi64>) -> tensor<2x16x100xf32>
  func.return %s : tensor<2x16x100xf32>
}

// CHECK-LABEL: func.func @loss_classes_last
// CHECK:       grad.softmax_cross_entropy %dl, %lp, %lab {reduction = "mean", class_axis = 2 : i64}

func.func @upsample(%dy: tensor<2x8x16x16xf32>, %dn: tensor<1x4x6x8xf32>) -> (tensor<2x8x4x4xf32>, tensor<1x4x3x4xf32>) {
  %dx = grad.resize %dy {mode = "linear", coordinate_transformation_mode = "half_pixel"} : (tensor<2x8x16x16xf32>) -> tensor<2x8x4x4xf32>
  %dn2 = grad.resize %dn {mode = "nearest", coordinate_transformation_mode = "asymmetric", nearest_mode = "floor"} : (tensor<1x4x6x8xf32>) -> tensor<1x4x3x4xf32>
  func.return %dx, %dn2 : tensor<2x8x4x4xf32>, tensor<1x4x3x4xf32>
}

// CHECK-LABEL: func.func @upsample
// CHECK:       grad.resize %dy {mode = "linear", coordinate_transformation_mode = "half_pixel"} : (tensor<2x8x16x16xf32>) -> tensor<2x8x4x4xf32>
// CHECK:       grad.resize %dn {mode = "nearest", coordinate_transformation_mode = "asymmetric", nearest_mode = "floor"}
