// RUN: MONET_ROUNDTRIP
// RUN: MONET_GENERIC_ROUNDTRIP

func.func @step(%x: tensor<8x64xf32> {monet.input = "x"}, %w: tensor<64x32xf32> {monet.param = "w", monet.trainable}, %k: tensor<16x12x3x3xf32> {monet.param = "conv.weight", monet.trainable}) -> tensor<8x32xf32> {
  %xq = mx.quantize %x {format = "mxfp8_e4m3", axis = 1 : i64, group = array<i64: 1, 32>} : tensor<8x64xf32>
  %wq = mx.quantize %w {format = "mxfp8_e4m3", axis = 0 : i64, group = array<i64: 1, 32>, node = "fc"} : tensor<64x32xf32>
  %y = nn.matmul %xq, %wq : (tensor<8x64xf32>, tensor<64x32xf32>) -> tensor<8x32xf32>
  %wt = mx.requantize %wq {format = "mxfp8_e4m3", axis = 1 : i64, group = array<i64: 1, 32>, phase = "backward"} : tensor<64x32xf32>
  %ws = mx.quantize %w {format = "mxfp4_e2m1", axis = 0 : i64, group = array<i64: 8, 8>} : tensor<64x32xf32>
  %kq = mx.quantize %k {format = "mxint8", axis = 1 : i64, group = array<i64: 8, 8>, partner = 0 : i64} : tensor<16x12x3x3xf32>
  func.return %y : tensor<8x32xf32>
}

// CHECK-LABEL: func.func @step
// CHECK:       %xq = mx.quantize %x {format = "mxfp8_e4m3", axis = 1 : i64, group = array<i64: 1, 32>} : tensor<8x64xf32>
// CHECK:       %wq = mx.quantize %w {format = "mxfp8_e4m3", axis = 0 : i64, group = array<i64: 1, 32>, node = "fc"} : tensor<64x32xf32>
// CHECK:       %wt = mx.requantize %wq {format = "mxfp8_e4m3", axis = 1 : i64, group = array<i64: 1, 32>, phase = "backward"} : tensor<64x32xf32>
// CHECK:       %ws = mx.quantize %w {format = "mxfp4_e2m1", axis = 0 : i64, group = array<i64: 8, 8>} : tensor<64x32xf32>
// CHECK:       %kq = mx.quantize %k {format = "mxint8", axis = 1 : i64, group = array<i64: 8, 8>, partner = 0 : i64} : tensor<16x12x3x3xf32>
// CHECK-GENERIC: %wt = "mx.requantize"(%wq) <{format = "mxfp8_e4m3", axis = 1 : i64, group = array<i64: 1, 32>, phase = "backward"}> : (tensor<64x32xf32>) -> tensor<64x32xf32>
